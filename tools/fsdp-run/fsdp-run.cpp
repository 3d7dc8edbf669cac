//===- fsdp-run.cpp - Runs an fsdp schedule for K training steps ----------===//
//
//   mpirun -np N fsdp-run SCHEDULE.json [--steps K] [--seed S]
//          [--device cpu|cuda|cuda:N] [--collectives auto|mpi|nccl]
//          [--alloc arena|per-buffer]
//          [--data FILE] [--data-order random|sequential]
//          [--init-from SAFETENSORS] [--export PATH.safetensors]
//          [--dump-params PATH] [--save DIR [--save-every K [--keep N]]]
//          [--load DIR]
//          [--progress none|test|thread] [--progress-interval MIN[:MAX]]
//          [--warmup W] [--profile] [--timeout S]
//
// Loads the schedule (world_size must be N), creates the device, and
// initialises every rank's shards or full (replicated) buffers
// deterministically (the full parameters do not depend on N or the
// strategy), reads them from a Hugging Face safetensors checkpoint
// (SafeTensors.h) or loads a checkpoint (Checkpoint.h) into the executor's
// device-resident state. Feeds synthetic, CSV, byte-level text or uint16
// token data (Data.h), runs K optimizer steps (the state stays on the device;
// the host sees the data in, the loss out), prints "step s loss x" per step on
// rank 0 and, as the last line, one JSON summary. Any error on any rank
// aborts all ranks (MPI_Abort) with a message; bad arguments print the usage
// and exit 2. --progress picks how MPI collectives progress while kernels
// run (runtime.h, fsdp_progress; results are bit-identical across modes);
// --profile adds per-op seconds per step (mean over ranks) to the summary.
//
//===----------------------------------------------------------------------===//
#include "Checkpoint.h"
#include "Data.h"
#include "SafeTensors.h"

#include "fsdp/Interpreter.h"
#include "fsdp/runtime.h"

#include <mpi.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <sys/resource.h>
#include <thread>
#include <unistd.h>
#include <vector>

using fsdp::rt::AllocMode;
using fsdp::rt::Error;
using fsdp::rt::Executor;
using fsdp::rt::HostValues;
using fsdp::rt::IoDesc;
using fsdp::rt::Program;

namespace {

//===--- Command line -----------------------------------------------------===//

struct Options {
  std::string schedule;
  int64_t steps = 1;
  uint64_t seed = 0;
  std::string dumpParams;
  std::string data;
  std::string dataOrder; // empty: random
  std::string initFrom, exportPath;
  std::string save, load;
  int64_t saveEvery = 0, keep = 0; // 0: save at the end only; keep all
  double timeout = 600;            // --timeout: the watchdog's seconds
  int progress = FSDP_PROGRESS_TEST;
  double intervalMin = 0, intervalMax = 0; // 0: the runtime's defaults
  int64_t warmup = 0;
  bool profile = false;
  std::string device = "cpu";
  std::string collectives = "auto";
  AllocMode alloc = AllocMode::Arena;
};

const char *kUsage =
    "usage: mpirun -np N fsdp-run SCHEDULE.json [--steps K] [--seed S]\n"
    "                [--data FILE] [--data-order O] [--init-from PATH]\n"
    "                [--export PATH] [--dump-params PATH] [--save DIR]\n"
    "                [--save-every K] [--keep N] [--load DIR] [--device D]\n"
    "                [--collectives C] [--alloc A]\n"
    "  --steps K          optimizer steps to run (default 1, K >= 1)\n"
    "  --device D         cpu (default), cuda (the local rank's GPU) or "
    "cuda:N\n"
    "  --collectives C    auto (default: MPI on cpu, NCCL on cuda), mpi (on\n"
    "                     cuda: staged through host memory, so that several\n"
    "                     ranks may share one GPU) or nccl\n"
    "  --alloc A          arena (default: one arena, the memory plan's "
    "offsets)\n"
    "                     or per-buffer (one device allocation per buffer, so\n"
    "                     that device_peak_bytes measures the step)\n"
    "  --seed S           seed of parameter init and synthetic data (default "
    "0)\n"
    "  --data FILE        instead of synthetic data: for a features/labels\n"
    "                     schedule a CSV (lines f0,...,fF-1,label); for a\n"
    "                     tokens/targets schedule a .bin file of uint16 token\n"
    "                     ids (nanoGPT / llm.c) or a text file read as bytes\n"
    "                     (vocabulary 256), windows of T+1 tokens\n"
    "  --data-order O     random (default) or sequential token windows: "
    "window\n"
    "                     g of step s reads tokens [((s-1)*B + g)*T, ... + "
    "T+1)\n"
    "                     of the file, wrapping (B the global batch)\n"
    "  --init-from PATH   initial parameters from a Hugging Face safetensors\n"
    "                     file, or a directory with "
    "model.safetensors(.index.json)\n"
    "                     and its shards; names = the schedule's FQNs; each "
    "rank\n"
    "                     reads only its shards' bytes\n"
    "  --export PATH      after training, write the full parameters as one\n"
    "                     safetensors file (Hugging Face names; each rank "
    "writes\n"
    "                     its shards' bytes)\n"
    "  --dump-params PATH write the final unpadded parameters (the f32\n"
    "                     master where a unit has one) and AdamW moments as\n"
    "                     JSON on rank 0\n"
    "  --save DIR         write the final sharded parameters and optimizer\n"
    "                     state to DIR (rank<r>.bin per rank, index.json)\n"
    "  --save-every K     with --save DIR: also save every K global steps, as\n"
    "                     DIR/step_<step> (and the last step at the end)\n"
    "  --keep N           with --save-every: keep the newest N checkpoints\n"
    "                     (default: all)\n"
    "  --load DIR         resume from a --save directory (or the newest\n"
    "                     step_<step> checkpoint under it): its step count\n"
    "                     continues (the next step is saved step + 1)\n"
    "  --progress MODE    how collectives progress while kernels run: none\n"
    "                     (only when waited), test (MPI_Test after every\n"
    "                     instruction; default), thread (a progress thread,\n"
    "                     MPI_THREAD_MULTIPLE). Results are identical.\n"
    "  --progress-interval MIN[:MAX]\n"
    "                     the progress thread's back-off in microseconds\n"
    "                     (default 20:1000)\n"
    "  --timeout S        watchdog: a step (or a save) that has not finished\n"
    "                     after S seconds stops the job, naming the step and\n"
    "                     the instruction it is in (default 600)\n"
    "  --warmup W         leave the first W steps out of the timings\n"
    "                     (default 0)\n"
    "  --profile          add \"profile\" to the summary: seconds and calls\n"
    "                     per step by op name (mean over ranks), plus comm\n"
    "                     wait, interpreter work and step set-up\n";

[[noreturn]] void usageError(const std::string &msg) {
  const char *r = std::getenv("OMPI_COMM_WORLD_RANK");
  if (!r || std::string(r) == "0") {
    std::fprintf(stderr, "fsdp-run: %s\n%s", msg.c_str(), kUsage);
    std::fflush(stderr);
  } else {
    // The other ranks exit after rank 0 has printed: mpirun stops every
    // rank when the first one exits.
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  std::exit(2);
}

bool parseInt(const std::string &s, int64_t &out) {
  if (s.empty())
    return false;
  char *end = nullptr;
  errno = 0;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno || *end)
    return false;
  out = v;
  return true;
}

Options parseArgs(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc || std::strncmp(argv[i + 1], "--", 2) == 0)
        usageError("missing value after " + a);
      // An empty value (an unset shell variable) must not mean "not given".
      if (!*argv[i + 1])
        usageError("empty value after " + a);
      return argv[++i];
    };
    if (a == "--help" || a == "-h") {
      std::printf("%s", kUsage);
      std::exit(0);
    } else if (a == "--steps") {
      if (!parseInt(value(), o.steps) || o.steps < 1)
        usageError("--steps needs an integer >= 1");
    } else if (a == "--seed") {
      int64_t s;
      if (!parseInt(value(), s) || s < 0)
        usageError("--seed needs a non-negative integer");
      o.seed = static_cast<uint64_t>(s);
    } else if (a == "--dump-params") {
      o.dumpParams = value();
    } else if (a == "--data") {
      o.data = value();
    } else if (a == "--data-order") {
      o.dataOrder = value();
      if (o.dataOrder != "random" && o.dataOrder != "sequential")
        usageError("--data-order needs random or sequential, got '" +
                   o.dataOrder + "'");
    } else if (a == "--init-from") {
      o.initFrom = value();
    } else if (a == "--export") {
      o.exportPath = value();
    } else if (a == "--save") {
      o.save = value();
    } else if (a == "--load") {
      o.load = value();
    } else if (a == "--save-every") {
      if (!parseInt(value(), o.saveEvery) || o.saveEvery < 1)
        usageError("--save-every needs an integer >= 1");
    } else if (a == "--keep") {
      if (!parseInt(value(), o.keep) || o.keep < 1)
        usageError("--keep needs an integer >= 1");
    } else if (a == "--progress") {
      std::string v = value();
      o.progress = fsdp_parse_progress(v.c_str());
      if (o.progress < 0)
        usageError("--progress needs none, test or thread, got '" + v + "'");
    } else if (a == "--progress-interval") {
      std::string v = value();
      size_t colon = v.find(':');
      int64_t lo = 0, hi = 0;
      if (!parseInt(v.substr(0, colon), lo) ||
          (colon != std::string::npos && !parseInt(v.substr(colon + 1), hi)))
        usageError("--progress-interval needs MIN or MIN:MAX microseconds");
      if (colon == std::string::npos)
        hi = std::max<int64_t>(lo, 1000);
      if (lo < 1 || hi < lo || hi > 10000000)
        usageError("--progress-interval needs 1 <= MIN <= MAX <= 1e7 us");
      o.intervalMin = lo * 1e-6;
      o.intervalMax = hi * 1e-6;
    } else if (a == "--timeout") {
      std::string v = value();
      char *end = nullptr;
      o.timeout = std::strtod(v.c_str(), &end);
      if (*end || !(o.timeout > 0) || o.timeout > 1e7)
        usageError("--timeout needs seconds in (0, 1e7], got '" + v + "'");
    } else if (a == "--warmup") {
      if (!parseInt(value(), o.warmup) || o.warmup < 0)
        usageError("--warmup needs an integer >= 0");
    } else if (a == "--profile") {
      o.profile = true;
    } else if (a == "--device") {
      o.device = value();
    } else if (a == "--collectives") {
      o.collectives = value();
      if (o.collectives != "auto" && o.collectives != "mpi" &&
          o.collectives != "nccl")
        usageError("--collectives needs auto, mpi or nccl, got '" +
                   o.collectives + "'");
    } else if (a == "--alloc") {
      std::string v = value();
      if (v == "arena")
        o.alloc = AllocMode::Arena;
      else if (v == "per-buffer")
        o.alloc = AllocMode::PerBuffer;
      else
        usageError("--alloc needs arena or per-buffer, got '" + v + "'");
    } else if (a.size() > 1 && a[0] == '-') {
      usageError("unknown option " + a);
    } else if (o.schedule.empty()) {
      o.schedule = a;
    } else {
      usageError("more than one schedule file given ('" + o.schedule +
                 "' and '" + a + "')");
    }
  }
  if (o.schedule.empty())
    usageError("no schedule file given");
  if (o.warmup >= o.steps)
    usageError("--warmup must be smaller than --steps");
  if (!o.initFrom.empty() && !o.load.empty())
    usageError("--init-from and --load both set the parameters; give one");
  if ((o.saveEvery || o.keep) && o.save.empty())
    usageError("--save-every and --keep need --save DIR");
  if (o.keep && !o.saveEvery)
    usageError("--keep needs --save-every");
  if (!o.dataOrder.empty() && o.data.empty())
    usageError("--data-order needs --data (a token file)");
  return o;
}

//===--- Parameters
//---------------------------------------------------------===//

void appendNumber(std::string &s, double v, bool isF32) {
  if (!std::isfinite(v)) {
    s += "null";
    return;
  }
  char buf[40];
  std::snprintf(buf, sizeof buf, isF32 ? "%.9g" : "%.17g", v);
  s += buf;
}

/// Every unit's whole padded buffer of input role `role` on rank 0 (empty
/// elsewhere; units without such an input are absent). Layout "full": rank
/// 0's copy. Layout "shard": the shards of ranks 0..S-1 (the first replica's
/// shard group) side by side. `maxDiff` is raised to the largest |difference|
/// between rank 0's result and the copies the other ranks (replicas) hold.
/// Collective over MPI_COMM_WORLD.
std::map<std::string, std::vector<double>> gatherRole(const Executor &ex,
                                                      const std::string &role,
                                                      int rank,
                                                      double &maxDiff) {
  const Program &p = ex.program();
  std::map<std::string, std::vector<double>> result;
  int64_t n = p.worldSize(), s = p.shardSize();
  for (const fsdp::rt::UnitDesc &u : p.units()) {
    const IoDesc *io = p.findUnitInput(role, u.name);
    if (!io)
      continue;
    std::vector<double> local;
    ex.read(io->buffer, local);
    int64_t cnt = static_cast<int64_t>(local.size());
    std::vector<double> all(rank == 0 ? cnt * n : 0);
    if (MPI_Gather(local.data(), static_cast<int>(cnt), MPI_DOUBLE, all.data(),
                   static_cast<int>(cnt), MPI_DOUBLE, 0,
                   MPI_COMM_WORLD) != MPI_SUCCESS)
      throw Error("MPI_Gather of unit '" + u.name + "' failed");
    if (rank != 0)
      continue;
    // Copies: every rank for "full"; the replicas k·S.. for "shard".
    bool full = io->layout == "full";
    int64_t copy = full ? cnt : cnt * s, copies = full ? n : n / s;
    for (int64_t k = 1; k < copies; ++k)
      for (int64_t i = 0; i < copy; ++i)
        maxDiff = std::max(maxDiff, std::fabs(all[k * copy + i] - all[i]));
    all.resize(copy);
    result[u.name] = std::move(all);
  }
  return result;
}

/// Writes {"fqn": {"shape": [...], "data": [...]}, ...} of the gathered
/// units (padding stripped) into `out`.
void appendRole(const Program &p,
                const std::map<std::string, std::vector<double>> &units,
                std::string &out) {
  out += "{";
  bool firstParam = true;
  for (const fsdp::rt::UnitDesc &u : p.units()) {
    auto it = units.find(u.name);
    if (it == units.end())
      continue;
    const std::vector<double> &full = it->second;
    bool f32 = u.dtype != fsdp::rt::DType::F64; // 9 digits for f32/bf16/f16
    for (const fsdp::rt::ParamDesc &pd : u.params) {
      out += firstParam ? "\n  " : ",\n  ";
      firstParam = false;
      out += nlohmann::json(pd.fqn).dump() + ": {\"shape\": [";
      for (size_t i = 0; i < pd.shape.size(); ++i)
        out += (i ? ", " : "") + std::to_string(pd.shape[i]);
      out += "], \"data\": [";
      for (int64_t i = 0; i < pd.numel; ++i) {
        if (i)
          out += ",";
        appendNumber(out, full[pd.offset + i], f32);
      }
      out += "]}";
    }
  }
  out += "}";
}

double mean(const std::vector<double> &v) {
  double s = 0;
  for (double x : v)
    s += x;
  return v.empty() ? 0 : s / static_cast<double>(v.size());
}

double stdev(const std::vector<double> &v) {
  if (v.size() < 2)
    return 0;
  double m = mean(v), s = 0;
  for (double x : v)
    s += (x - m) * (x - m);
  return std::sqrt(s / static_cast<double>(v.size() - 1));
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/// Fails before any training if an output path cannot be written, so that a
/// long run is not lost at its end: the --dump-params file must be creatable
/// (its directory exists and is writable), the --save directory creatable.
void checkOutputPaths(const Options &opt) {
  namespace fs = std::filesystem;
  for (auto [flag, path] : {std::pair{"--dump-params", &opt.dumpParams},
                            std::pair{"--export", &opt.exportPath}}) {
    if (path->empty())
      continue;
    fs::path dir = fs::absolute(*path).parent_path();
    if (fs::is_directory(*path) || !fs::is_directory(dir) ||
        access(dir.c_str(), W_OK) != 0)
      throw Error(std::string("cannot write ") + flag + " file '" + *path +
                  "' (not a writable location)");
  }
  // --export writes PATH.partial: create it once now (a directory of that
  // name, /proc, a full disk fail here, not after training).
  if (!opt.exportPath.empty() && fsdp_rank() == 0) {
    std::string partial = opt.exportPath + ".partial";
    int fd = ::open(partial.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
      throw Error("cannot write --export file '" + opt.exportPath + "': '" +
                  partial + "': " + std::strerror(errno));
    ::close(fd);
    ::unlink(partial.c_str());
  }
  if (!opt.save.empty())
    fsdp::run::checkSaveDir(opt.save, opt.saveEvery > 0);
}

/// This process's peak resident set (getrusage ru_maxrss, KiB on Linux), in
/// bytes.
int64_t peakRssBytes() {
  struct rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<int64_t>(ru.ru_maxrss) * 1024;
}

/// Stops the job when a step (or a save) runs longer than --timeout: a
/// rank that stopped responding (SIGSTOP, a collective that never
/// completes) would otherwise hang every other rank forever. The thread
/// names the step and the instruction the Executor is in, writes the message
/// and exits the process non-zero, which makes mpirun stop every rank (the
/// main thread may be blocked inside MPI, so MPI_Abort is not called).
class Watchdog {
public:
  Watchdog(double timeout, const Executor &ex, int rank)
      : timeout(timeout), ex(ex), rank(rank), thread([this] { loop(); }) {}
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> l(m);
      stopping = true;
    }
    cv.notify_all();
    thread.join();
  }
  /// Starts timing `what` ("step 5", "the save of step 5").
  void begin(std::string what) {
    std::lock_guard<std::mutex> l(m);
    phase = std::move(what);
    start = fsdp_now();
    active = true;
  }
  void end() {
    std::lock_guard<std::mutex> l(m);
    active = false;
  }

private:
  void loop() {
    std::unique_lock<std::mutex> l(m);
    auto tick = std::chrono::duration<double>(std::min(0.25, timeout / 4));
    while (!cv.wait_for(l, tick, [this] { return stopping; })) {
      if (!active || fsdp_now() - start <= timeout)
        continue;
      const Program &p = ex.program();
      int64_t i = ex.currentInstruction();
      std::string where;
      if (i >= 0) {
        const std::string &op = p.instructions()[static_cast<size_t>(i)].op;
        bool coll = op == "fsdp.all_gather" || op == "fsdp.reduce_scatter" ||
                    op == "fsdp.all_reduce" || op == "fsdp.wait";
        where = "; it is in " + p.where(static_cast<size_t>(i)) +
                (coll ? ", a collective: another rank is stopped, dead or "
                        "running something else"
                      : "");
      } else if (i == Executor::kStepEnd) {
        where = "; it is waiting for the step's last collectives (another "
                "rank is stopped, dead or running something else)";
      }
      std::fprintf(stderr,
                   "[rank %d] fsdp-run: error: watchdog: %s has not finished "
                   "after %g s (--timeout)%s\n",
                   rank, phase.c_str(), timeout, where.c_str());
      std::fflush(stderr);
      std::_Exit(1);
    }
  }

  const double timeout;
  const Executor &ex;
  const int rank;
  std::mutex m;
  std::condition_variable cv;
  bool stopping = false, active = false;
  std::string phase;
  double start = 0;
  std::thread thread; // last: started once the members above exist
};

/// The options that change what a rank does, one "--option value" per line
/// (paths by presence, and a data file by its size: ranks may read
/// node-local copies).
std::string workOf(const Options &o) {
  namespace fs = std::filesystem;
  auto given = [](const std::string &v) {
    return v.empty() ? "none" : "given";
  };
  std::string data = "none";
  if (!o.data.empty()) {
    std::error_code ec;
    auto size = fs::file_size(o.data, ec);
    data = ec ? "a file that cannot be read"
              : "a file of " + std::to_string(size) + " bytes";
  }
  std::ostringstream w;
  w << "--steps " << o.steps << "\n--seed " << o.seed << "\n--warmup "
    << o.warmup << "\n--data " << data << "\n--data-order "
    << (o.dataOrder.empty() ? "random" : o.dataOrder) << "\n--init-from "
    << given(o.initFrom) << "\n--load " << given(o.load) << "\n--save "
    << given(o.save) << "\n--save-every " << o.saveEvery << "\n--keep "
    << o.keep << "\n--export " << given(o.exportPath) << "\n--dump-params "
    << given(o.dumpParams) << "\n--profile " << (o.profile ? "on" : "off")
    << "\n--device " << (o.device.rfind("cuda", 0) == 0 ? "cuda" : o.device)
    << "\n--collectives " << o.collectives << "\n--alloc "
    << (o.alloc == AllocMode::Arena ? "arena" : "per-buffer");
  return w.str();
}

/// Throws on every rank unless every rank was started with the same work
/// (an MPMD launch `-np 1 fsdp-run s.json --steps 3 : -np 1 ... --steps 5`
/// would otherwise hang after step 3), naming the first option that
/// differs and both ranks' values. Collective over MPI_COMM_WORLD.
void checkSameWorkOnAllRanks(const Options &o) {
  int world = fsdp_world_size();
  if (world <= 1)
    return;
  std::string mine = workOf(o);
  int len = static_cast<int>(mine.size());
  std::vector<int> lens(static_cast<size_t>(world)),
      offs(static_cast<size_t>(world));
  MPI_Allgather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, MPI_COMM_WORLD);
  int total = 0;
  for (int r = 0; r < world; ++r) {
    offs[static_cast<size_t>(r)] = total;
    total += lens[static_cast<size_t>(r)];
  }
  std::string all(static_cast<size_t>(total), '\0');
  MPI_Allgatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(),
                 offs.data(), MPI_CHAR, MPI_COMM_WORLD);
  auto lines = [&](int r) {
    std::vector<std::string> out;
    std::istringstream in(
        all.substr(static_cast<size_t>(offs[static_cast<size_t>(r)]),
                   static_cast<size_t>(lens[static_cast<size_t>(r)])));
    for (std::string l; std::getline(in, l);)
      out.push_back(l);
    return out;
  };
  std::vector<std::string> first = lines(0);
  for (int r = 1; r < world; ++r) {
    std::vector<std::string> other = lines(r);
    for (size_t i = 0; i < first.size() && i < other.size(); ++i)
      if (first[i] != other[i])
        throw fsdp::rt::CollectiveError(
            "the ranks were started with different options: rank " +
            std::to_string(r) + " has " + other[i] + ", rank 0 has " +
            first[i] +
            " (every rank must run the same steps on the same "
            "data)");
  }
}

/// The device options of --device and --collectives.
fsdp_collectives collectivesOf(const Options &opt) {
  bool cuda = opt.device.rfind("cuda", 0) == 0;
  if (opt.collectives == "nccl" && !cuda)
    throw Error("--collectives nccl needs a cuda device, got --device " +
                opt.device);
  return opt.collectives == "mpi" && cuda ? FSDP_COLLECTIVES_MPI
                                          : FSDP_COLLECTIVES_NATIVE;
}

int runMain(const Options &opt) {
  int rank = fsdp_rank();
  checkSameWorkOnAllRanks(opt);
  checkOutputPaths(opt);
  Program prog = Program::fromFile(opt.schedule);
  int64_t n = prog.worldSize();
  // Data first (a bad file fails before the device is set up), then the
  // device, its channels and the resident state.
  fsdp::run::DataSource data(prog, opt.data, opt.seed, rank,
                             opt.dataOrder == "sequential"
                                 ? fsdp::run::DataOrder::Sequential
                                 : fsdp::run::DataOrder::Random);
  // A checkpoint's headers are checked before the device is set up too.
  std::optional<fsdp::run::SafeTensorsArchive> init;
  if (!opt.initFrom.empty())
    init = fsdp::run::SafeTensorsArchive::open(opt.initFrom);
  fsdp::rt::Device device(opt.device, collectivesOf(opt));
  Executor ex(prog, device.get(), opt.alloc);
  if (rank == 0 && opt.alloc == AllocMode::Arena && !ex.usesArena())
    std::fprintf(stderr,
                 "fsdp-run: note: %s has no complete memory plan "
                 "(arena_bytes and every buffer's arena_offset): "
                 "allocating per buffer\n",
                 prog.name().c_str());

  // Initial state: parameter shards (layout "shard": this rank's shard at
  // its index r mod S in the shard group; "full": the whole padded buffer,
  // the same on every rank) and zero optimizer moments, or a checkpoint's.
  // A `master` starts from the same values as `param`; a bf16/f16 `param`
  // gets them rounded (through f32), i.e. cast(master).
  for (const IoDesc &io : prog.inputs()) {
    if (!fsdp::rt::isStateRole(io.role))
      continue;
    const fsdp::rt::UnitDesc *unit = prog.findUnit(io.unit);
    if (!unit)
      throw Error(prog.name() + ": input buffer " + std::to_string(io.buffer) +
                  " (role '" + io.role + "'" +
                  (io.fqn.empty() ? std::string() : ", fqn '" + io.fqn + "'") +
                  ") is a whole unsharded parameter with no 'unit': fsdp-run "
                  "needs per-unit shards, i.e. a schedule from the FSDP "
                  "pipeline (fsdp-opt --fsdp-pipeline), not from "
                  "fsdp-autodiff alone");
    if (io.role == "param" || io.role == "master")
      ex.write(io.buffer, io.layout == "full"
                              ? fsdp::run::initFull(*unit, opt.seed)
                              : fsdp::run::initShard(*unit, opt.seed,
                                                     rank % prog.shardSize()));
    // Moments stay as the executor zeroed them.
  }
  if (init)
    fsdp::run::initFromSafeTensors(*init, ex, rank);
  int64_t startStep = 0;
  fsdp::run::RunMeta meta{opt.seed, opt.data,
                          opt.dataOrder.empty() ? "random" : opt.dataOrder};
  if (!opt.load.empty()) {
    std::string from = fsdp::run::resolveCheckpoint(opt.load);
    if (rank == 0 && from != opt.load)
      std::fprintf(stderr, "fsdp-run: --load: resuming from %s\n",
                   from.c_str());
    fsdp::run::LoadedCheckpoint ck = fsdp::run::loadCheckpoint(from, ex, rank);
    startStep = ck.step;
    // The data stream is a function of these and the step: a resumed run
    // that changes them trains on other data (allowed, but said).
    if (rank == 0 && ck.hasMeta &&
        (ck.meta.seed != meta.seed || ck.meta.dataOrder != meta.dataOrder))
      std::fprintf(
          stderr,
          "fsdp-run: warning: --load: the checkpoint's run had --seed %llu "
          "--data-order %s; this run has --seed %llu --data-order %s, so its "
          "data and initialisation differ from the saved run's\n",
          static_cast<unsigned long long>(ck.meta.seed),
          ck.meta.dataOrder.c_str(), static_cast<unsigned long long>(meta.seed),
          meta.dataOrder.c_str());
  }
  // The resident set's high-water mark once the state is in place (Linux
  // reports ru_maxrss in KiB): what initialisation cost on the host.
  int64_t initRss = peakRssBytes();
  int64_t lossId = -1, stepId = -1;
  for (const IoDesc &out : prog.outputs())
    if (out.role == "loss")
      lossId = out.buffer;
  if (lossId < 0)
    throw Error(prog.name() + ": the schedule has no output with role 'loss'");
  for (const IoDesc &io : prog.inputs())
    if (io.role == "step")
      stepId = io.buffer;

  int64_t globalBatch =
      prog.globalBatch() > 0 ? prog.globalBatch() : data.globalBatch;
  Watchdog watchdog(opt.timeout, ex, rank);
  // Statistics from here: the device's allocator peak covers the steps.
  fsdp_device_reset_stats(device.get());
  // Per step, max over ranks: wall time of the step, kernel time, wait time.
  std::vector<double> losses, stepTimes, computeTimes, commTimes;
  int64_t peak = 0;
  double profiledSeconds = 0; // step wall time of the profiled steps
  HostValues in;              // this step's data, reused every step
  for (int64_t step = startStep + 1; step <= startStep + opt.steps; ++step) {
    bool timed = step > startStep + opt.warmup;
    if (opt.profile) {
      fsdp_profile_enable(timed);
      if (step == startStep + opt.warmup + 1)
        fsdp_profile_reset();
    }
    watchdog.begin("step " + std::to_string(step));
    data.fill(step, in);
    if (stepId >= 0)
      in[stepId] = {static_cast<double>(step)};
    fsdp_device_stats s0{}, s1{};
    fsdp_device_get_stats(device.get(), &s0);
    double t0 = fsdp_now();
    // Only the data and the step number travel to the device.
    for (auto &[id, values] : in)
      ex.write(id, values);
    ex.step();
    double local = ex.readScalar(lossId);
    double t1 = fsdp_now();
    fsdp_device_get_stats(device.get(), &s1);
    double times[3] = {t1 - t0, s1.compute_seconds - s0.compute_seconds,
                       s1.comm_wait_seconds - s0.comm_wait_seconds};
    peak = std::max(peak, ex.lastPeakBytes());
    double sum = 0, maxTimes[3];
    if (MPI_Allreduce(&local, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD) !=
            MPI_SUCCESS ||
        MPI_Allreduce(times, maxTimes, 3, MPI_DOUBLE, MPI_MAX,
                      MPI_COMM_WORLD) != MPI_SUCCESS)
      throw Error("MPI_Allreduce of the loss failed");
    double loss = sum / static_cast<double>(n);
    losses.push_back(loss);
    if (timed) {
      stepTimes.push_back(maxTimes[0]);
      computeTimes.push_back(maxTimes[1]);
      commTimes.push_back(maxTimes[2]);
      profiledSeconds += times[0];
    }
    watchdog.end();
    if (rank == 0) {
      std::printf("step %lld loss %.6f\n", static_cast<long long>(step), loss);
      std::fflush(stdout);
    }
    if (opt.saveEvery &&
        (step % opt.saveEvery == 0 || step == startStep + opt.steps)) {
      watchdog.begin("the save of step " + std::to_string(step));
      fsdp::run::saveCheckpoint(
          fsdp::run::periodicCheckpointDir(opt.save, step), ex, step, rank,
          meta);
      watchdog.end();
      if (rank == 0 && opt.keep)
        fsdp::run::pruneCheckpoints(opt.save, opt.keep);
    }
  }
  fsdp_device_stats stats{};
  fsdp_device_get_stats(device.get(), &stats);

  fsdp_profile_enable(0);
  // Per-op seconds and calls per step, mean over ranks (every rank runs the
  // same instructions, so the sorted op names agree).
  nlohmann::json profile = nlohmann::json::object();
  if (opt.profile) {
    int count = fsdp_profile_count();
    std::vector<double> local(2 * count + 1), sum(2 * count + 1);
    double timedSteps = static_cast<double>(stepTimes.size());
    double inSteps = 0;
    for (int i = 0; i < count; ++i) {
      local[2 * i] = fsdp_profile_seconds(i) / timedSteps;
      local[2 * i + 1] =
          static_cast<double>(fsdp_profile_calls(i)) / timedSteps;
      inSteps += fsdp_profile_seconds(i);
    }
    // Not in any instruction: the data upload, binding the inputs, the
    // carried state's copies, the final waits' bookkeeping, the loss read.
    local[2 * count] = (profiledSeconds - inSteps) / timedSteps;
    MPI_Allreduce(local.data(), sum.data(), 2 * count + 1, MPI_DOUBLE, MPI_SUM,
                  MPI_COMM_WORLD);
    for (int i = 0; i < count; ++i)
      profile[fsdp_profile_op(i)] = {
          {"seconds", sum[2 * i] / static_cast<double>(n)},
          {"calls", sum[2 * i + 1] / static_cast<double>(n)}};
    profile["(step set-up)"] = {
        {"seconds", sum[2 * count] / static_cast<double>(n)}, {"calls", 1}};
  }

  // Max over ranks: the plan's bookkeeping peak, the arena, the allocator's
  // peak and the memory outside its pool.
  long long mine[5] = {peak, ex.arenaBytes(), stats.memory_peak_bytes,
                       stats.workspace_bytes, stats.comm_buffer_bytes},
            most[5];
  MPI_Allreduce(mine, most, 5, MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);

  if (!opt.dumpParams.empty()) {
    double maxDiff = 0;
    std::string text = "{\"params\": ";
    // A unit with an f32 master reports it; other units their (widened)
    // param buffer.
    auto params = gatherRole(ex, "master", rank, maxDiff);
    for (auto &[name, values] : gatherRole(ex, "param", rank, maxDiff))
      params.emplace(name, std::move(values)); // keeps a master if present
    appendRole(prog, params, text);
    text += ",\n\"exp_avg\": ";
    appendRole(prog, gatherRole(ex, "exp_avg", rank, maxDiff), text);
    text += ",\n\"exp_avg_sq\": ";
    appendRole(prog, gatherRole(ex, "exp_avg_sq", rank, maxDiff), text);
    // Replicated copies (full layouts, other replicas) should agree exactly.
    text += ",\n\"replica_max_abs_diff\": ";
    appendNumber(text, maxDiff, false);
    text += "}\n";
    if (rank == 0 && maxDiff != 0)
      std::fprintf(stderr,
                   "fsdp-run: warning: replicated parameter or optimizer "
                   "state copies differ by up to %g\n",
                   maxDiff);
    if (rank == 0) {
      std::ofstream f(opt.dumpParams);
      if (!f || !(f << text) || !f.flush())
        throw Error("cannot write --dump-params file '" + opt.dumpParams + "'");
    }
  }
  if (!opt.save.empty() && !opt.saveEvery) {
    watchdog.begin("the save of step " + std::to_string(startStep + opt.steps));
    fsdp::run::saveCheckpoint(opt.save, ex, startStep + opt.steps, rank, meta);
    watchdog.end();
  }
  if (!opt.exportPath.empty())
    fsdp::run::exportSafeTensors(opt.exportPath, ex, startStep + opt.steps,
                                 rank);
  long long rss[2] = {initRss, peakRssBytes()}, maxRss[2];
  MPI_Allreduce(rss, maxRss, 2, MPI_LONG_LONG, MPI_MAX, MPI_COMM_WORLD);

  if (rank == 0) {
    double st = median(stepTimes);
    // A figure the schedule does not give is null.
    auto planned = [](int64_t v) {
      return v < 0 ? nlohmann::json(nullptr) : nlohmann::json(v);
    };
    auto perStep = [&](fsdp_collective k) {
      return stats.comm_bytes[k] / opt.steps;
    };
    nlohmann::json summary = {
        {"world_size", n},
        {"steps", opt.steps},
        {"first_step", startStep + 1},
        {"losses", losses},
        {"final_loss", losses.back()},
        {"device", fsdp_device_name(device.get())},
        {"collectives", fsdp_device_collectives(device.get())},
        {"alloc", opt.alloc == AllocMode::Arena && ex.usesArena()
                      ? "arena"
                      : "per-buffer"},
        {"peak_bytes", static_cast<int64_t>(most[0])},
        {"planned_peak_bytes", planned(prog.plannedPeakBytes())},
        {"planned_peak_bytes_with_scratch",
         planned(prog.plannedPeakBytesWithScratch())},
        {"device_peak_bytes", static_cast<int64_t>(most[2])},
        {"device_workspace_bytes", static_cast<int64_t>(most[3])},
        {"device_comm_buffer_bytes", static_cast<int64_t>(most[4])},
        {"arena_bytes", static_cast<int64_t>(most[1])},
        {"init_peak_rss_bytes", static_cast<int64_t>(maxRss[0])},
        {"peak_rss_bytes", static_cast<int64_t>(maxRss[1])},
        {"state_outputs_in_place", ex.inPlaceOutputs()},
        {"state_outputs_copied", ex.copiedOutputs()},
        {"comm_bytes", perStep(FSDP_COLL_ALL_GATHER) +
                           perStep(FSDP_COLL_REDUCE_SCATTER) +
                           perStep(FSDP_COLL_ALL_REDUCE)},
        {"comm_bytes_by_collective",
         {{"all_gather", perStep(FSDP_COLL_ALL_GATHER)},
          {"reduce_scatter", perStep(FSDP_COLL_REDUCE_SCATTER)},
          {"all_reduce", perStep(FSDP_COLL_ALL_REDUCE)}}},
        {"sharding",
         {{"strategy", prog.strategy()},
          {"replicas", prog.replicas()},
          {"shard_size", prog.shardSize()}}},
        {"step_time_s", st},
        {"samples_per_s", st > 0 ? globalBatch / st : 0.0},
        {"step_time_mean_s", mean(stepTimes)},
        {"step_time_stdev_s", stdev(stepTimes)},
        {"timed_steps", static_cast<int64_t>(stepTimes.size())},
        {"progress", fsdp_progress_name(fsdp_get_progress())},
        {"compute_time_s", median(computeTimes)},
        {"comm_wait_time_s", median(commTimes)}};
    if (opt.profile)
      summary["profile"] = profile;
    if (data.globalTokens > 0)
      summary["tokens_per_s"] = st > 0 ? data.globalTokens / st : 0.0;
    std::printf("%s\n", summary.dump().c_str());
    std::fflush(stdout);
  }
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  Options opt = parseArgs(argc, argv);
  if (fsdp_set_progress(static_cast<fsdp_progress>(opt.progress)) != FSDP_OK ||
      (opt.intervalMin > 0 &&
       fsdp_set_progress_interval(opt.intervalMin, opt.intervalMax) !=
           FSDP_OK)) {
    std::fprintf(stderr, "fsdp-run: %s\n", fsdp_last_error());
    return 2;
  }
  if (fsdp_init(&argc, &argv) != FSDP_OK) {
    std::fprintf(stderr, "fsdp-run: %s\n", fsdp_last_error());
    return 1;
  }
  try {
    runMain(opt);
  } catch (const fsdp::rt::CollectiveError &e) {
    // Every rank found it; rank 0 reports, the others give its abort time
    // to arrive (then abort themselves, should rank 0 be gone).
    if (fsdp_rank() != 0)
      std::this_thread::sleep_for(std::chrono::seconds(10));
    fsdp_abort((std::string("fsdp-run: error: ") + e.what()).c_str(), 1);
  } catch (const std::exception &e) {
    fsdp_abort((std::string("fsdp-run: error: ") + e.what()).c_str(), 1);
  }
  fsdp_finalize();
  return 0;
}
