"""Shared set-up of the fsdp-run end-to-end scripts (fsdp_run_*_e2e.py).

Each script is run by ctest as `script.py FSDP_RUN MPIRUN SCHEDULE_DIR`.
Provides the Open MPI environment (shared-memory transport, root allowed, a
private session directory: concurrent mpiruns under ctest -j racing to
create /tmp/ompi.<host>.<uid> fail in orte_init otherwise), a temporary
directory, `check` (records failures), `mpirun` and `finish` (exit status).
"""
import os
import subprocess
import sys
import tempfile

FSDP_RUN, MPIRUN, SCHED = sys.argv[1], sys.argv[2], sys.argv[3]
tmp = tempfile.mkdtemp()
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_pml="ob1", OMPI_MCA_btl="self,vader", OMPI_MCA_rmaps_base_oversubscribe="1",
           OMPI_MCA_orte_tmpdir_base=tmp)
failures = []


def check(cond, what):
    """Prints ok/FAIL for one assertion and records a failure."""
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def mpirun(n, *args, timeout=60):
    """Runs fsdp-run on n ranks; returns (exit code, stdout, stderr)."""
    cmd = [MPIRUN, "--oversubscribe", "-np", str(n), FSDP_RUN, *args]
    p = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def finish():
    """Prints the failure count and exits non-zero if any check failed."""
    print("%d failure(s)" % len(failures))
    sys.exit(1 if failures else 0)
