#!/usr/bin/env python3
"""signal_run.py SIGNAL DIR GLOB WAIT_S COMMAND...: runs COMMAND, waits until a file matching GLOB
appears anywhere under DIR (a temporary being written; up to WAIT_S seconds), sends SIGNAL (TERM,
INT, ...) and exits with COMMAND's exit status.

When the command dies of the signal itself (no handler: nothing was cleaned up) the exit status
is 255 and a line says so, so that ci/adversarial.sh counts it as a crash rather than as the
clean exit 128 + SIGNAL it expects. Exit 254: nothing matching GLOB appeared (the command was
then killed with SIGKILL; the reproducer could not be staged).
"""
import fnmatch
import os
import signal
import subprocess
import sys
import time


def matching(top, pattern):
    for root, _dirs, files in os.walk(top):
        for name in files:
            if fnmatch.fnmatch(name, pattern):
                return os.path.join(root, name)
    return None


def main():
    sig = getattr(signal, "SIG" + sys.argv[1])
    top, pattern, wait_s, cmd = sys.argv[2], sys.argv[3], float(sys.argv[4]), sys.argv[5:]
    child = subprocess.Popen(cmd)
    deadline = time.monotonic() + wait_s
    seen = None
    while child.poll() is None and time.monotonic() < deadline:
        seen = matching(top, pattern)
        if seen:
            break
        time.sleep(0.002)
    if not seen:
        if child.poll() is None:
            child.kill()
            child.wait()
        print(f"signal_run.py: no file matching {pattern} appeared under {top} within {wait_s} s "
              f"(command exit {child.returncode})", file=sys.stderr)
        sys.exit(254)
    child.send_signal(sig)
    code = child.wait()
    if code < 0:
        print(f"signal_run.py: the command died of signal {-code} (no clean exit 128+{sig.value}; "
              f"temporary seen: {os.path.basename(seen)})", file=sys.stderr)
        sys.exit(255)
    sys.exit(code)


if __name__ == "__main__":
    main()
