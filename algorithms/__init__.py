from isles import refuse_old_name

refuse_old_name(__name__)  # imported as top-level 'algorithms': one line naming isles.algorithms
