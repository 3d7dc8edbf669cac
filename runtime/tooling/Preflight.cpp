//===- Preflight.cpp - fsdp-run's checks before step 1 --------------------===//
#include "fsdp/tooling/Preflight.h"
#include "fsdp/tooling/Checkpoint.h"

#include <mpi.h>

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

using fsdp::Error;
using fsdp::rt::AllocMode;

namespace fsdp::tooling {

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
    checkSaveDir(opt.save, opt.saveEvery > 0);
}

namespace {

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
  w << "--steps " << o.steps << "\n--total-steps "
    << (o.totalSteps ? std::to_string(o.totalSteps) : "unset") << "\n--seed "
    << o.seed << "\n--warmup " << o.warmup << "\n--data " << data
    << "\n--data-order " << (o.dataOrder.empty() ? "random" : o.dataOrder)
    << "\n--init-from " << given(o.initFrom) << "\n--load " << given(o.load)
    << "\n--save " << given(o.save) << "\n--save-every " << o.saveEvery
    << "\n--keep " << o.keep << "\n--export " << given(o.exportPath)
    << "\n--dump-params " << given(o.dumpParams) << "\n--profile "
    << (o.profile ? "on" : "off") << "\n--device "
    << (o.device.rfind("cuda", 0) == 0 ? "cuda" : o.device)
    << "\n--collectives " << o.collectives << "\n--alloc "
    << (o.alloc == AllocMode::Arena ? "arena" : "per-buffer") << "\n--compiled "
    << given(o.compiled);
  return w.str();
}

} // namespace

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
        throw fsdp::CollectiveError(
            "the ranks were started with different options: rank " +
            std::to_string(r) + " has " + other[i] + ", rank 0 has " +
            first[i] +
            " (every rank must run the same steps on the same "
            "data)");
  }
}

fsdp_collectives collectivesOf(const Options &opt) {
  bool cuda = opt.device.rfind("cuda", 0) == 0;
  if (opt.collectives == "nccl" && !cuda)
    throw Error("--collectives nccl needs a cuda device, got --device " +
                opt.device);
  return opt.collectives == "mpi" && cuda ? FSDP_COLLECTIVES_MPI
                                          : FSDP_COLLECTIVES_NATIVE;
}

} // namespace fsdp::tooling
