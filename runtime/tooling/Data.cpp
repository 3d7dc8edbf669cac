//===- Data.cpp - fsdp-run's deterministic parameters and training data ---===//
//
// Implementation of Data.h: hashing, parameter init strings, synthetic data,
// CSV rows and byte-level text windows. Every value depends only on the
// seed, the global step and the global sample index, never on the world
// size, so runs on different numbers of ranks see the same global batch.
//
//===----------------------------------------------------------------------===//
#include "fsdp/tooling/Data.h"

#include "fsdp/InitSpec.h"
#include "fsdp/InitValues.h"
#include "fsdp/Sharding.h"
#include "fsdp/kernels.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <cerrno>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

using fsdp::Error;
using fsdp::rt::HostValues;
using fsdp::schedule::IoDesc;
using fsdp::schedule::Program;

namespace fsdp::tooling {

uint64_t splitmix64(uint64_t x) { return init::splitmix64(x); }
uint64_t fnv1a(const std::string &s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s)
    h = (h ^ c) * 0x100000001b3ULL;
  return h;
}
uint64_t hashKey(std::initializer_list<uint64_t> vals) {
  uint64_t h = 0x5eed5eed5eed5eedULL;
  for (uint64_t v : vals)
    h = splitmix64(h ^ v);
  return h;
}
double uniform01(uint64_t h) { return init::uniform01(h); }
double normal01(uint64_t h) {
  double u1 = uniform01(splitmix64(h ^ 1)), u2 = uniform01(splitmix64(h ^ 2));
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

namespace {

enum Tag : uint64_t {
  kParam = 1,
  kFeature = 2,
  kTeacher = 3,
  kToken = 4,
  kTokenMap = 5,
  kLabel = 6,
  kWindow = 7
};

/// The spec of parameter `fqn`'s init string (fsdp/InitSpec.h, the forms
/// the compiler's verifier accepts).
fsdp::init::Spec initSpec(const std::string &init, const std::string &fqn) {
  fsdp::init::Spec spec;
  switch (fsdp::init::parse(init, spec)) {
  case fsdp::init::ParseError::None:
    return spec;
  case fsdp::init::ParseError::BadNumber:
    throw Error("parameter '" + fqn + "': bad init '" + init + "'");
  case fsdp::init::ParseError::UnknownKind:
    break;
  }
  throw Error("parameter '" + fqn + "': unknown init '" + init +
              "' (supported: " + fsdp::init::kForms + ")");
}

/// fsdp_init_values' kind of a spec.
int initKind(const fsdp::init::Spec &spec) {
  switch (spec.kind) {
  case fsdp::init::Kind::Zeros:
    return init::kInitZeros;
  case fsdp::init::Kind::Ones:
    return init::kInitOnes;
  case fsdp::init::Kind::Uniform:
    return init::kInitUniform;
  case fsdp::init::Kind::Normal:
    return init::kInitNormal;
  case fsdp::init::Kind::Constant:
    return init::kInitConstant;
  }
  return init::kInitZeros;
}

/// Value of element `i` of parameter `fqn` for init `spec`
/// (fsdp/InitValues.h: the drivers' fsdp_init_values computes the same).
double initValue(const fsdp::init::Spec &spec, uint64_t seed,
                 const std::string &fqn, int64_t i) {
  return init::initValue(initKind(spec), spec.value, seed, fnv1a(fqn),
                         static_cast<uint64_t>(i));
}

void readCsv(const std::string &path, int64_t featPerSample,
             std::vector<std::vector<double>> &features,
             std::vector<int64_t> &labels) {
  std::ifstream in(path);
  if (!in)
    throw Error("cannot open data file '" + path + "'");
  std::string line;
  int64_t lineNo = 0;
  while (std::getline(in, line)) {
    ++lineNo;
    if (!line.empty() && line.back() == '\r')
      line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos)
      continue;
    std::vector<double> vals;
    std::stringstream ss(line);
    std::string cell;
    while (std::getline(ss, cell, ',')) {
      char *end = nullptr;
      double v = std::strtod(cell.c_str(), &end);
      while (end && (*end == ' ' || *end == '\t'))
        ++end;
      if (cell.find_first_not_of(" \t") == std::string::npos || *end)
        throw Error(path + ":" + std::to_string(lineNo) + ": '" + cell +
                    "' is not a number");
      if (!std::isfinite(v))
        throw Error(path + ":" + std::to_string(lineNo) + ": '" + cell +
                    "' is not a finite number");
      vals.push_back(v);
    }
    // Unknown width (a pipeline stage that reads the labels alone): the
    // first row's.
    if (featPerSample < 0)
      featPerSample = static_cast<int64_t>(vals.size()) - 1;
    if (static_cast<int64_t>(vals.size()) != featPerSample + 1)
      throw Error(path + ":" + std::to_string(lineNo) + ": expected " +
                  std::to_string(featPerSample + 1) + " values (" +
                  std::to_string(featPerSample) +
                  " features and a label), got " + std::to_string(vals.size()));
    double lab = vals.back();
    if (lab != std::floor(lab))
      throw Error(path + ":" + std::to_string(lineNo) + ": label " +
                  std::to_string(lab) + " is not an integer");
    labels.push_back(static_cast<int64_t>(lab));
    vals.pop_back();
    features.push_back(std::move(vals));
  }
  if (labels.empty())
    throw Error("data file '" + path + "' has no rows");
}

} // namespace

namespace {

/// Calls fn(p, spec, lo, hi) for each parameter of `u` overlapping flat
/// elements [begin, end), [lo, hi) the overlap.
template <typename Fn>
void forEachParamIn(const fsdp::schedule::UnitDesc &u, int64_t begin,
                    int64_t end, Fn fn) {
  for (const fsdp::schedule::ParamDesc &p : u.params) {
    int64_t lo = std::max(begin, p.offset);
    int64_t hi = std::min(end, p.offset + p.numel);
    if (lo < hi)
      fn(p, initSpec(p.init, p.fqn), lo, hi);
  }
}

/// Flat elements [begin, begin + count) of `u`'s initial values.
std::vector<double> initRange(const fsdp::schedule::UnitDesc &u, uint64_t seed,
                              int64_t begin, int64_t count, int64_t tpRank,
                              int64_t tp) {
  std::vector<double> out(count, 0.0);
  forEachParamIn(u, begin, begin + count,
                 [&](const fsdp::schedule::ParamDesc &p,
                     const fsdp::init::Spec &spec, int64_t lo, int64_t hi) {
                   for (int64_t f = lo; f < hi; ++f)
                     out[f - begin] =
                         initValue(spec, seed, p.fqn,
                                   p.globalIndex(f - p.offset, tpRank, tp));
                 });
  return out;
}

} // namespace

std::vector<double> initFull(const fsdp::schedule::UnitDesc &u, uint64_t seed,
                             int64_t tpRank, int64_t tp) {
  return initRange(u, seed, 0, u.paddedNumel, tpRank, tp);
}

std::vector<double> initShard(const fsdp::schedule::UnitDesc &u, uint64_t seed,
                              int64_t shardIndex, int64_t tpRank, int64_t tp) {
  return initRange(u, seed, shardIndex * u.shardNumel, u.shardNumel, tpRank,
                   tp);
}

void initUnitOnDevice(fsdp_stream s, const fsdp::schedule::UnitDesc &u,
                      uint64_t seed, int64_t shardIndex, void *param,
                      fsdp_dtype paramDtype, void *master,
                      fsdp_dtype masterDtype, int threads, int64_t tpRank,
                      int64_t tp) {
  auto check = [&](int status, const char *what) {
    if (status != FSDP_OK)
      throw Error("initialising unit '" + u.name + "': " + what + ": " +
                  fsdp_last_error());
  };
  int64_t begin = shardIndex < 0 ? 0 : shardIndex * u.shardNumel;
  int64_t count = shardIndex < 0 ? u.paddedNumel : u.shardNumel;
  int64_t end = begin + count;
  size_t pb = fsdp_dtype_size(paramDtype), mb = fsdp_dtype_size(masterDtype);
  check(fsdp_memset_zero(s, param, static_cast<size_t>(count) * pb),
        "fsdp_memset_zero");
  if (master)
    check(fsdp_memset_zero(s, master, static_cast<size_t>(count) * mb),
          "fsdp_memset_zero");
  forEachParamIn(
      u, begin, end,
      [&](const fsdp::schedule::ParamDesc &p, const fsdp::init::Spec &spec,
          int64_t lo, int64_t hi) {
        if (spec.kind == fsdp::init::Kind::Zeros)
          return; // zero-filled above
        // One call per run of consecutive global indices.
        for (int64_t f = lo; f < hi;) {
          int64_t local = f - p.offset;
          int64_t n = std::min(hi - f, p.contiguousRun(local));
          size_t at = static_cast<size_t>(f - begin);
          check(fsdp_init_values(
                    s, paramDtype, static_cast<char *>(param) + at * pb,
                    masterDtype,
                    master ? static_cast<char *>(master) + at * mb : nullptr, n,
                    static_cast<int64_t>(seed),
                    static_cast<int64_t>(fnv1a(p.fqn)),
                    p.globalIndex(local, tpRank, tp), initKind(spec),
                    spec.value, threads),
                ("fsdp_init_values of '" + p.fqn + "'").c_str());
          f += n;
        }
      });
  check(fsdp_stream_synchronize(s), "fsdp_stream_synchronize");
}

DataSource::DataSource(const Program &p, const std::string &dataFile,
                       uint64_t seed, int rank, DataOrder order)
    : prog(p), seed(seed), order(order) {
  // The batch is split over the data-parallel ranks; the T ranks of a
  // tensor-parallel group read the same rows.
  int64_t n = p.worldSize() / p.tensorParallel();
  for (const IoDesc &io : p.inputs()) {
    if (io.role != "features" && io.role != "labels" && io.role != "tokens" &&
        io.role != "targets")
      continue;
    const auto &b = p.buffer(io.buffer);
    if (b.shape.empty())
      throw Error(p.name() + ": data input " + std::to_string(io.buffer) +
                  " must have a batch dimension");
    Slot s{io.buffer, io.role, b.shape[0], 0, 0};
    int64_t global =
        io.globalShape.empty() ? b.shape[0] * n : io.globalShape[0];
    if (global != b.shape[0] * n)
      throw Error(p.name() + ": data input " + std::to_string(io.buffer) +
                  ": global batch " + std::to_string(global) + " != local " +
                  std::to_string(b.shape[0]) + " x data-parallel size " +
                  std::to_string(n));
    globalBatch = global;
    s.perSample = s.local ? b.numel / s.local : 0;
    s.firstRow = p.dataRank(rank) * s.local;
    slots.push_back(s);
  }
  for (size_t i = 0; i < slots.size(); ++i) {
    if (slots[i].role == "features")
      featuresSlot = static_cast<int>(i);
    if (slots[i].role == "tokens")
      tokensSlot = static_cast<int>(i);
    if (slots[i].role == "targets" && windowSlot < 0)
      windowSlot = static_cast<int>(i);
  }
  if (tokensSlot >= 0)
    windowSlot = tokensSlot;
  if (tokensSlot >= 0)
    globalTokens = globalBatch * slots[tokensSlot].perSample;
  classes = p.numClasses();
  // A pipeline's last stage of a features model reads the labels alone:
  // from the CSV rows the first stage reads the features of.
  bool labelsOnly =
      featuresSlot < 0 && windowSlot < 0 && p.pipelineStages() > 1 &&
      std::any_of(slots.begin(), slots.end(),
                  [](const Slot &s) { return s.role == "labels"; });
  if (labelsOnly && dataFile.empty())
    throw Error(p.name() +
                ": a pipeline stage that reads the labels but not the "
                "features cannot synthesise them (the synthetic labels are a "
                "function of the features): pass --data with a CSV file");
  // A middle pipeline stage reads no data.
  if (dataFile.empty() || (slots.empty() && p.pipelineStages() > 1))
    return;
  if (std::filesystem::is_directory(dataFile))
    throw Error("data file '" + dataFile + "' is a directory");
  if (featuresSlot >= 0 || labelsOnly) {
    readCsv(dataFile, featuresSlot >= 0 ? slots[featuresSlot].perSample : -1,
            csvFeatures, csvLabels);
    // Each step's global batch takes consecutive rows; fewer rows than one
    // batch would repeat samples within a step.
    if (static_cast<int64_t>(csvLabels.size()) < globalBatch)
      throw Error("data file '" + dataFile + "' has " +
                  std::to_string(csvLabels.size()) +
                  " rows; one step's global batch needs " +
                  std::to_string(globalBatch));
  } else if (windowSlot >= 0) {
    int64_t seq = slots[windowSlot].perSample;
    std::string ext = std::filesystem::path(dataFile).extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(), ::tolower);
    bool bin = ext == ".bin";
    if (bin) {
      mapTokens(dataFile);
    } else {
      errno = 0;
      std::ifstream in(dataFile, std::ios::binary);
      if (!in)
        throw Error(
            "cannot open data file '" + dataFile + "'" +
            (errno ? std::string(": ") + std::strerror(errno) : std::string()));
      std::stringstream ss;
      ss << in.rdbuf();
      text = ss.str();
      numTokens = static_cast<int64_t>(text.size());
      if (classes > 256 && rank == 0)
        std::fprintf(
            stderr,
            "fsdp-run: warning: --data '%s' is read as bytes (token ids "
            "0-255) for a model with a vocabulary of %lld; a file of "
            "uint16 token ids must end in .bin\n",
            dataFile.c_str(), static_cast<long long>(classes));
      if (classes >= 0 && classes < 256)
        throw Error("--data '" + dataFile +
                    "' is read as bytes (vocabulary "
                    "256) but the schedule's logits have only " +
                    std::to_string(classes) +
                    " classes (a .bin file of "
                    "uint16 token ids takes any vocabulary)");
    }
    if (numTokens < seq + 1)
      throw Error("data file '" + dataFile + "' has " +
                  std::to_string(numTokens) + (bin ? " tokens" : " bytes") +
                  "; a window of T+1 = " + std::to_string(seq + 1) +
                  (bin ? " tokens" : " bytes") + " is needed");
    if (bin && classes >= 0) {
      // Every id is checked once, before step 1: a bad id found at step
      // 5000 would cost the run.
      for (int64_t i = 0; i < numTokens; ++i)
        if (ids[i] >= classes)
          throw Error("data file '" + dataFile + "': token id " +
                      std::to_string(ids[i]) + " at position " +
                      std::to_string(i) + " (token index; byte " +
                      std::to_string(2 * i) +
                      ") is >= the model's "
                      "vocabulary of " +
                      std::to_string(classes));
    }
  } else {
    throw Error("--data needs a schedule with a 'features' (CSV) or 'tokens' "
                "(text) input");
  }
}

DataSource::~DataSource() {
  if (ids)
    ::munmap(const_cast<uint16_t *>(ids), mappedBytes);
}

void DataSource::mapTokens(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    throw Error("cannot open data file '" + path +
                "': " + std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    throw Error("cannot stat data file '" + path + "'");
  }
  mappedBytes = static_cast<size_t>(st.st_size);
  if (mappedBytes % 2) {
    ::close(fd);
    throw Error("data file '" + path + "' has " + std::to_string(mappedBytes) +
                " bytes, not a whole number of uint16 token ids");
  }
  numTokens = static_cast<int64_t>(mappedBytes / 2);
  if (mappedBytes) {
    void *m = ::mmap(nullptr, mappedBytes, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) {
      ::close(fd);
      throw Error("cannot map data file '" + path +
                  "': " + std::strerror(errno));
    }
    ids = static_cast<const uint16_t *>(m);
  }
  ::close(fd);
}

int64_t DataSource::tokenAt(int64_t i) const {
  i %= numTokens;
  return ids ? ids[i] : static_cast<unsigned char>(text[i]);
}

void DataSource::fill(int64_t step, HostValues &in) const {
  for (const Slot &s : slots) {
    std::vector<double> &v = in[s.buffer];
    v.assign(s.local * s.perSample, 0.0);
    for (int64_t r = 0; r < s.local; ++r)
      fillRow(step, s, s.firstRow + r, &v[r * s.perSample]);
  }
}

// Features of global sample g at `step` (synthetic or from the CSV).
void DataSource::featureRow(int64_t step, int64_t g, double *out) const {
  if (!csvLabels.empty()) {
    const auto &row = csvFeatures[csvRow(step, g)];
    std::copy(row.begin(), row.end(), out);
    return;
  }
  for (int64_t j = 0; j < slots[featuresSlot].perSample; ++j)
    out[j] = normal01(
        hashKey({seed, kFeature, (uint64_t)step, (uint64_t)g, (uint64_t)j}));
}

size_t DataSource::csvRow(int64_t step, int64_t g) const {
  return static_cast<size_t>(((step - 1) * globalBatch + g) %
                             static_cast<int64_t>(csvLabels.size()));
}

int64_t DataSource::needClasses() const {
  if (classes < 1)
    throw Error(prog.name() + ": cannot synthesise labels: the schedule has no "
                              "nn.cross_entropy to give the class count");
  return classes;
}

int64_t DataSource::token(int64_t step, int64_t g, int64_t t) const {
  return static_cast<int64_t>(
      hashKey({seed, kToken, (uint64_t)step, (uint64_t)g, (uint64_t)t}) %
      static_cast<uint64_t>(needClasses()));
}

// The learnable next-token rule for synthetic targets: (a·tok + c) mod V.
int64_t DataSource::mapToken(int64_t tok) const {
  uint64_t v = static_cast<uint64_t>(needClasses());
  uint64_t a = 1 + hashKey({seed, kTokenMap, 0}) % std::max<uint64_t>(v - 1, 1);
  uint64_t c = hashKey({seed, kTokenMap, 1}) % v;
  return static_cast<int64_t>((a * static_cast<uint64_t>(tok) + c) % v);
}

// Start of window g of `step` in the token file (DataOrder).
int64_t DataSource::windowOffset(int64_t step, int64_t g) const {
  int64_t seq = slots[windowSlot].perSample;
  if (order == DataOrder::Sequential)
    return static_cast<int64_t>(
        (static_cast<unsigned __int128>((step - 1) * globalBatch + g) * seq) %
        static_cast<uint64_t>(numTokens)); // no overflow for 2^63-token files
  uint64_t span = static_cast<uint64_t>(numTokens - seq);
  return static_cast<int64_t>(
      hashKey({seed, kWindow, (uint64_t)step, (uint64_t)g}) % span);
}

void DataSource::fillRow(int64_t step, const Slot &s, int64_t g,
                         double *out) const {
  const Slot *features = featuresSlot >= 0 ? &slots[featuresSlot] : nullptr;
  bool tokens = windowSlot >= 0;
  if (s.role == "features") {
    featureRow(step, g, out);
  } else if (tokens && numTokens > 0 &&
             (s.role == "tokens" || s.role == "targets" ||
              (s.role == "labels" && !features))) {
    // Token file: tokens = w[o, o+T), targets = w[o+1, o+T].
    int64_t o = windowOffset(step, g) + (s.role == "tokens" ? 0 : 1);
    for (int64_t t = 0; t < s.perSample; ++t)
      out[t] = static_cast<double>(tokenAt(o + t));
  } else if (s.role == "tokens") {
    for (int64_t t = 0; t < s.perSample; ++t)
      out[t] = static_cast<double>(token(step, g, t));
  } else if (s.role == "labels" && !csvLabels.empty()) {
    if (s.perSample != 1)
      throw Error("--data gives one label per sample but the labels input "
                  "has " +
                  std::to_string(s.perSample));
    out[0] = static_cast<double>(csvLabels[csvRow(step, g)]);
  } else if (s.role == "labels" && features) {
    // Teacher labels: argmax_c sum_j T[c][j] x[p][j] per position p.
    int64_t c = needClasses(), pos = s.perSample;
    if (features->perSample % pos)
      throw Error(prog.name() + ": features per sample (" +
                  std::to_string(features->perSample) +
                  ") are not a multiple of label positions (" +
                  std::to_string(pos) + ")");
    int64_t f = features->perSample / pos;
    std::vector<double> x(features->perSample);
    featureRow(step, g, x.data());
    for (int64_t p = 0; p < pos; ++p) {
      int64_t best = 0;
      double bestVal = -INFINITY;
      for (int64_t k = 0; k < c; ++k) {
        double acc = 0;
        for (int64_t j = 0; j < f; ++j)
          acc += normal01(hashKey({seed, kTeacher, (uint64_t)k, (uint64_t)j})) *
                 x[p * f + j];
        if (acc > bestVal) {
          bestVal = acc;
          best = k;
        }
      }
      out[p] = static_cast<double>(best);
    }
  } else if ((s.role == "labels" || s.role == "targets") && tokens) {
    for (int64_t t = 0; t < s.perSample; ++t)
      out[t] = static_cast<double>(mapToken(token(step, g, t)));
  } else {
    for (int64_t t = 0; t < s.perSample; ++t)
      out[t] = static_cast<double>(
          hashKey({seed, kLabel, (uint64_t)step, (uint64_t)g, (uint64_t)t}) %
          static_cast<uint64_t>(needClasses()));
  }
}

} // namespace fsdp::tooling
