import time, sys, os, tempfile
t=time.perf_counter()
def lap(name):
    global t
    n=time.perf_counter(); print(f"{name}: {n-t:.2f}s", flush=True); t=n
import mlflow; lap("import mlflow")
from mlflow.tracking import MlflowClient; lap("import client")
d=tempfile.mkdtemp(); os.chdir(d)
mlflow.set_tracking_uri(f"sqlite:///{d}/mlflow.db"); lap("set uri")
mlflow.set_experiment("x"); lap("set_experiment (creates db)")
r=mlflow.start_run(); lap("start_run")
mlflow.log_params({f"p{i}": i for i in range(120)}); lap("log_params")
mlflow.log_text("a: 1", "config.yaml"); lap("log_text")
mlflow.end_run(); lap("end_run")
mlflow.set_experiment("x"); lap("set_experiment 2")
r=mlflow.start_run(); lap("start_run 2")
import matplotlib; matplotlib.use("Agg"); import matplotlib.pyplot as plt; lap("import pyplot")
fig=plt.figure(); plt.plot([1,2,3]); mlflow.log_figure(fig, "c.png"); lap("log_figure")
mlflow.end_run(); lap("end_run 2")
