"""The built-in island algorithms as the options of the config group ``algorithm``.

Each option ``conf/algorithm/NAME.yaml`` extends the node that Hydra's ConfigStore holds as
``schema/algorithm/NAME`` (:func:`isles.islands.config.schema.register`): the class's ``_target_`` and
every field of its ``Params`` dataclass with its default (:func:`isles.islands.config.schema.class_node`),
so that an algorithm's defaults are written once, in its ``Params``. A user's own algorithm needs
no entry here: ``algorithm._target_=my_module.MyAlgorithm`` names it.
"""

from isles.algorithms.cmaes.cmaes import CMAES
from isles.algorithms.coevolution.cde import CDE
from isles.algorithms.de.de import DE
from isles.algorithms.ep.fep import FEP
from isles.algorithms.ga.ga import GA
from isles.algorithms.lshade.jso import JSO
from isles.algorithms.lshade.lshade import LSHADE
from isles.algorithms.pso.epso import EPSO
from isles.algorithms.pso.pso import PSO

#: the built-in algorithms by the name of their option (``algorithm=NAME``)
ALGORITHMS = {
    "cde": CDE,
    "cmaes": CMAES,
    "de": DE,
    "epso": EPSO,
    "fep": FEP,
    "ga": GA,
    "jso": JSO,
    "lshade": LSHADE,
    "pso": PSO,
}
