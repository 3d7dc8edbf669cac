//===- fsdp-calibrate.cpp - Measures this machine as a cluster spec -------===//
//
//   mpirun -np N fsdp-calibrate [-o SPEC.json] [--seconds S] [--rows M]
//          [--hidden H] [--seq T] [--heads A] [--vocab V] [--layers L]
//          [--name NAME] [--devices-per-node D]
//
// Writes a cluster spec (bench/clusters/*.json) of THIS machine running N
// ranks at once. The command line is here; the measurements, the fits and
// the spec are the fsdp_calibrate library (runtime/calibrate/Calibrate.cpp
// describes the method).
//
//===----------------------------------------------------------------------===//
#include "fsdp/calibrate/Calibrate.h"
#include "fsdp/runtime.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

using fsdp::calibrate::Options;

namespace {

const char *kUsage =
    "usage: mpirun -np N fsdp-calibrate [-o SPEC.json] [--seconds S]\n"
    "                [--rows M] [--hidden H] [--seq T] [--heads A]\n"
    "                [--vocab V] [--layers L] [--name NAME]\n"
    "                [--devices-per-node D]\n"
    "  -o SPEC.json   where to write the cluster spec ('-': stdout, default)\n"
    "  --seconds S    time per measured kernel (default 0.3)\n"
    "  --rows M       token rows per rank (default 256 = 4 x 64)\n"
    "  --hidden H     hidden size (default 128; MLP 4H)\n"
    "  --seq T        sequence length (default 64)\n"
    "  --heads A      attention heads (default 4)\n"
    "  --vocab V      vocabulary (default 256)\n"
    "  --layers L     blocks per step: weights the once-per-step ops (output\n"
    "                 projection, cross-entropy) by 1/L (default 4)\n"
    "  --name NAME    the spec's name\n"
    "  --devices-per-node D  the ranks one node runs, the spec's\n"
    "                 devices_per_node (default: max(N, online cores)); with\n"
    "                 cores_per_node the simulator slows a rank down by\n"
    "                 min(world, D) / cores when that exceeds 1\n";

[[noreturn]] void usageError(const std::string &msg) {
  const char *r = std::getenv("OMPI_COMM_WORLD_RANK");
  if (!r || std::string(r) == "0")
    std::fprintf(stderr, "fsdp-calibrate: %s\n%s", msg.c_str(), kUsage);
  std::exit(2);
}

Options parseArgs(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc)
        usageError("missing value after " + a);
      return argv[++i];
    };
    auto positive = [&](int64_t &out) {
      std::string v = value();
      char *end = nullptr;
      errno = 0;
      long long x = std::strtoll(v.c_str(), &end, 10);
      if (errno || *end || x < 1 || x > (1 << 20))
        usageError(a + " needs a positive integer");
      out = x;
    };
    if (a == "-h" || a == "--help") {
      std::printf("%s", kUsage);
      std::exit(0);
    } else if (a == "-o") {
      o.out = value();
    } else if (a == "--seconds") {
      std::string v = value();
      char *end = nullptr;
      o.seconds = std::strtod(v.c_str(), &end);
      if (*end || !(o.seconds > 0) || o.seconds > 60)
        usageError("--seconds needs a number in (0, 60]");
    } else if (a == "--rows") {
      positive(o.rows);
    } else if (a == "--hidden") {
      positive(o.hidden);
    } else if (a == "--seq") {
      positive(o.seq);
    } else if (a == "--heads") {
      positive(o.heads);
    } else if (a == "--vocab") {
      positive(o.vocab);
    } else if (a == "--layers") {
      positive(o.layers);
    } else if (a == "--name") {
      o.name = value();
    } else if (a == "--devices-per-node") {
      positive(o.devicesPerNode);
    } else {
      usageError("unknown argument " + a);
    }
  }
  if (o.rows % o.seq)
    usageError("--rows (" + std::to_string(o.rows) +
               ") must be a multiple of --seq (" + std::to_string(o.seq) + ")");
  if (o.hidden % o.heads)
    usageError("--hidden (" + std::to_string(o.hidden) +
               ") must be a multiple of --heads (" + std::to_string(o.heads) +
               ")");
  // The output must be writable before a minute of measuring: a directory
  // that exists and is writable, and not a directory itself.
  if (o.out != "-") {
    struct stat st;
    std::string dir = o.out.find('/') == std::string::npos
                          ? std::string(".")
                          : o.out.substr(0, o.out.rfind('/') + 1);
    if (stat(o.out.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
      usageError("-o " + o.out + " is a directory");
    if (access(dir.c_str(), W_OK) != 0)
      usageError("cannot write '" + o.out + "': directory '" + dir + "' " +
                 (access(dir.c_str(), F_OK) != 0 ? "does not exist"
                                                 : "is not writable"));
  }
  return o;
}

} // namespace

int main(int argc, char **argv) {
  Options o = parseArgs(argc, argv);
  if (fsdp_init(&argc, &argv) != FSDP_OK) {
    std::fprintf(stderr, "fsdp-calibrate: %s\n", fsdp_last_error());
    return 1;
  }
  try {
    fsdp::calibrate::runCalibration(o);
  } catch (const std::exception &e) {
    fsdp_abort((std::string("fsdp-calibrate: error: ") + e.what()).c_str(), 1);
  }
  fsdp_finalize();
  return 0;
}
