//===- CheckpointDirs.cpp - where fsdp-run --save / --load put checkpoints ===//
//
// The directory policy of Checkpoint.h, apart from the format: a save may
// only replace an absent or empty directory or a checkpoint; --save-every
// keeps step_<N> checkpoints under a root and prunes the oldest; --load of a
// root picks its newest complete one.
//
//===----------------------------------------------------------------------===//
#include "fsdp/tooling/Checkpoint.h"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <unistd.h>

using fsdp::Error;
using nlohmann::json;
namespace fs = std::filesystem;

namespace fsdp::tooling {

namespace {

/// The step of a root entry named step_<digits> (optionally .partial), or -1.
int64_t stepOfEntry(const std::string &name, bool &partial) {
  partial =
      name.size() > 8 && name.compare(name.size() - 8, 8, ".partial") == 0;
  std::string base = partial ? name.substr(0, name.size() - 8) : name;
  if (base.rfind("step_", 0) != 0 || base.size() == 5 ||
      base.find_first_not_of("0123456789", 5) != std::string::npos)
    return -1;
  return std::stoll(base.substr(5));
}

bool isCheckpointDir(const fs::path &p) {
  std::ifstream in(p / "index.json");
  json idx = in ? json::parse(in, nullptr, false) : json();
  return idx.is_object() &&
         idx.value("format", std::string()) == "fsdp-checkpoint";
}

/// The complete step_* checkpoints under `root`, oldest first.
std::vector<std::pair<int64_t, fs::path>>
periodicCheckpoints(const fs::path &root) {
  std::vector<std::pair<int64_t, fs::path>> out;
  std::error_code ec;
  for (const auto &e : fs::directory_iterator(root, ec)) {
    bool partial;
    int64_t step = stepOfEntry(e.path().filename().string(), partial);
    if (step >= 0 && !partial && isCheckpointDir(e.path()))
      out.push_back({step, e.path()});
  }
  std::sort(out.begin(), out.end());
  return out;
}

} // namespace

void checkSaveDir(const std::string &dir, bool periodic) {
  std::error_code ec;
  fs::path p = fs::absolute(dir);
  auto fail = [&](const std::string &why) {
    throw Error("cannot write --save directory '" + dir + "' (" + why + ")");
  };
  if (fs::exists(p, ec)) {
    if (!fs::is_directory(p, ec))
      fail("it is not a directory");
    if (periodic) {
      for (const auto &e : fs::directory_iterator(p, ec)) {
        bool partial;
        if (stepOfEntry(e.path().filename().string(), partial) < 0)
          fail("with --save-every it holds step_<N> checkpoints, and '" +
               e.path().filename().string() + "' is not one");
      }
    } else if (!fs::is_empty(p, ec) && !isCheckpointDir(p)) {
      fail("it exists and is not an fsdp checkpoint; a save replaces the "
           "directory");
    }
    if (access(p.c_str(), W_OK) != 0)
      fail("it is not writable");
  } else {
    fs::create_directories(periodic ? p : p.parent_path(), ec);
    if (ec || !fs::is_directory(p.parent_path(), ec))
      fail(ec ? ec.message() : "its parent is not a directory");
  }
  if (access(p.parent_path().c_str(), W_OK) != 0)
    fail("its parent directory is not writable");
}

std::string periodicCheckpointDir(const std::string &root, int64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "step_%08lld", static_cast<long long>(step));
  return (fs::path(root) / name).string();
}

void pruneCheckpoints(const std::string &root, int64_t keep) {
  auto all = periodicCheckpoints(root);
  std::error_code ec;
  for (size_t i = 0; i + static_cast<size_t>(keep) < all.size(); ++i)
    fs::remove_all(all[i].second, ec);
}

std::string resolveCheckpoint(const std::string &dir) {
  if (!fs::is_directory(dir) || fs::exists(fs::path(dir) / "index.json"))
    return dir; // loadCheckpoint names what is wrong
  auto all = periodicCheckpoints(dir);
  if (all.empty())
    throw Error("--load: '" + dir +
                "' has no index.json and no complete step_<N> "
                "checkpoint (not a checkpoint directory, or no save finished)");
  return all.back().second.string();
}

void warnIfOtherData(const RunMeta &saved, const RunMeta &now, int rank) {
  auto name = [](const RunMeta &m) {
    return m.data.empty()
               ? std::string("synthetic data")
               : "'" + m.data + "'" +
                     (m.dataSha256.empty() ? std::string()
                                           : " (SHA-256 " + m.dataSha256 + ")");
  };
  bool other = saved.data.empty() != now.data.empty() ||
               (!saved.dataSha256.empty() && !now.dataSha256.empty()
                    ? saved.dataSha256 != now.dataSha256
                    : saved.data != now.data);
  if (rank == 0 && other)
    std::fprintf(stderr,
                 "fsdp-run: warning: --load: the checkpoint's run trained on "
                 "%s; this run reads %s, so the resumed steps see other data "
                 "than the saved run would have\n",
                 name(saved).c_str(), name(now).c_str());
}

} // namespace fsdp::tooling
