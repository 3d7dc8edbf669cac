# lit configuration of the fsdp-opt test suite: FileCheck tests of every pass,
# -verify-diagnostics tests of every dialect, and end-to-end runs under mpirun.
import os
import lit.formats
from lit.llvm import llvm_config

config.name = "FSDP"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.fsdp_obj_root, "test", "lit")
config.excludes = ["Inputs", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py"]

llvm_config.with_system_environment(["HOME", "PATH", "OMPI_MCA_pml", "OMPI_MCA_btl"])
llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.fsdp_tools_dir, append_path=True)
# Shared-memory transport between ranks on one box; no network interfaces.
config.environment["OMPI_MCA_pml"] = "ob1"
config.environment["OMPI_MCA_btl"] = "self,vader"
config.environment["OMPI_MCA_rmaps_base_oversubscribe"] = "1"
config.environment["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
config.environment["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
config.environment["OMP_NUM_THREADS"] = "1"
# Concurrent mpiruns race to create and remove Open MPI's shared session
# directory (<base>/ompi.<host>.<uid>: "File exists" aborts one of them), so
# every test gets its own base, %t.ompi (lit expands %t after this substitution).
config.environment["OPENBLAS_NUM_THREADS"] = "1"

config.substitutions.append(("%mpirun", config.mpiexec +
                              " --allow-run-as-root --oversubscribe --mca orte_tmpdir_base %t.ompi"))
config.substitutions.append(("%python", config.python_executable))
config.substitutions.append(("%fsdp_src", config.fsdp_src_root))
config.substitutions.append(("%shared", os.path.join(os.path.dirname(config.fsdp_src_root), "shared")))

llvm_config.add_tool_substitutions(["fsdp-opt", "fsdp-import", "fsdp-sweep", "fsdp-translate", "fsdp-run",
                                    "fsdp-calibrate", "fsdp-compile", "FileCheck",
                                    "not", "count"],
                                   [config.fsdp_tools_dir, config.llvm_tools_dir])

# -debug-only exists (and LLVM_DEBUG is compiled in: HandleLLVMOptions drops
# NDEBUG) only against an LLVM built with assertions; Debian's is not.
if config.llvm_enable_assertions.upper() in ("ON", "1", "TRUE", "YES"):
    config.available_features.add("asserts")

# This CPU's x86 instruction sets as the kernel reports them (/proc/cpuinfo),
# for the tests of the cpu driver's BLAS kernel choice (Integration/blas.test).
try:
    with open("/proc/cpuinfo") as cpuinfo:
        cpu_flags = next((line.split(":", 1)[1].split() for line in cpuinfo
                          if line.startswith("flags")), [])
except OSError:
    cpu_flags = []
if "avx2" in cpu_flags and "fma" in cpu_flags:
    config.available_features.add("x86-avx2")
