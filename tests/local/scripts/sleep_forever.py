"""Print a line, then sleep until killed; with --spawn, leave a child and a daemonised grandchild."""

import subprocess
import sys
import time

if "--spawn" in sys.argv:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
    # setsid leaves the replica's process group: only the runner's subreaper role can catch it.
    escaped = subprocess.Popen(["setsid", sys.executable, "-c", "import time; time.sleep(3600)"])
    print(f"spawned {child.pid} {escaped.pid}", flush=True)
print("sleeping", flush=True)
time.sleep(3600)
