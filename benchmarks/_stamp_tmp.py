import subprocess, sys, time
t0 = time.perf_counter()
p = subprocess.Popen(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
for line in p.stdout:
    print(f"[{time.perf_counter()-t0:6.2f}] {line.rstrip()[:200]}", flush=True)
p.wait(); print(f"[{time.perf_counter()-t0:6.2f}] exit {p.returncode}")
