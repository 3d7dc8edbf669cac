//===- Benchmarks.h - The micro-benchmarks of fsdp-calibrate ----*- C++ -*-===//
//
// Each runs on every rank at once (Measure.h) and returns what it measured;
// the fits (Fit.h) turn that into the simulator's parameters. Sizes are in
// elements unless named bytes; times in seconds.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_CALIBRATE_BENCHMARKS_H
#define FSDP_CALIBRATE_BENCHMARKS_H

#include "fsdp/calibrate/Calibrate.h"
#include "fsdp/calibrate/Measure.h"

#include <string>
#include <vector>

namespace fsdp::calibrate {

//===--- Kernels ----------------------------------------------------------===//

/// Every kernel measurement of one pass, each kernel called through the
/// runtime's entry points (fsdp/kernels.h) as the interpreter calls them, at
/// the shapes of one rank's share of a GPT-2 block (Options).
struct Kernels {
  /// GEMMs: f32 linear and its backward matmuls at the block's shapes
  /// (mm32), f64 linear at the same (mm64), 512³ f32 and f64 linear (big).
  std::vector<Case> mm32, mm64, big;
  /// Data movement (embedding, split, concat, position_embedding,
  /// fsdp.flatten: no FLOPs but position_embedding's one add per element),
  /// and kernels recorded but not fitted (broadcast).
  std::vector<Case> mem, info;
  /// Attention forward and backward; the block's other ops (elementwise).
  std::vector<Case> att, ew;
  /// memcpy of the largest activation (M × 4H floats) and of 32 MiB.
  Stat copy, copyBig;
  /// Their rates, read + write bytes per second (STREAM's copy count).
  double bw = 0, bwBig = 0;
};

/// One pass over every kernel, `seconds` each.
Kernels measureKernels(const Machine &mc, const Options &o, double seconds);

/// Per case, the pass with the median seconds (the passes run one after
/// another, so a burst of other work on the machine spoils at most one).
Kernels medianOfPasses(std::vector<Kernels> passes);

//===--- Collectives ------------------------------------------------------===//

/// One collective size: kind ("all_gather", "reduce_scatter"), the gathered
/// bytes, seconds per collective.
struct CollPoint {
  std::string kind;
  double bytes, seconds;
};

/// All-gather, reduce-scatter, all-reduce (world group) and one message
/// from rank 0 to rank 1 (send_recv) through the runtime's C API
/// (fsdp_*_start + fsdp_wait, f32) of 64 B ... 4 MiB (the full buffer;
/// powers of 2; nccl-tests' sweep, NVIDIA/nccl-tests README "-b 8 -e
/// 128M -f 2"), back to back in batches of 8 after a barrier: the time of one =
/// batch time / 8, max over ranks, median over the batches; at least 3
/// batches and then until `budget` seconds are spent.
std::vector<CollPoint> measureCollectives(const Machine &mc, double budget);

//===--- Host work --------------------------------------------------------===//

/// The interpreter's own cost, through fsdp::schedule::Program and Executor as
/// fsdp-run drives them.
struct Host {
  Stat chain, single, io, relu; ///< seconds per run / per relu kernel
  int64_t chainLength = 2000;   ///< instructions of the chain
  int64_t ioCount = 1 << 18;    ///< floats in and out of the I/O step
  double dispatch = 0;          ///< seconds per instruction beyond its kernel
  double ioBandwidth = 0;       ///< bytes in + out per second; 0: not seen
};

/// The interpreter's cost per instruction (a chain of 2000 relu of 16
/// floats, minus their kernels) and the rate at which a step's inputs and
/// outputs enter and leave it (one relu of 1 MiB in and out, minus one
/// instruction and the relu kernel), `seconds` per measurement.
Host measureHost(const Machine &mc, double seconds);

//===--- Overlap and synchronisation --------------------------------------===//

struct Overlap {
  /// Medians of the max over ranks, seconds: the GEMMs alone (t_c), the
  /// gather alone (t_m), both (t_both).
  double compute = 0, comm = 0, both = 0;
  double overlap = 1;           ///< (t_c + t_m − t_both) / min(t_c, t_m)
  int64_t gemms = 0, bytes = 0; ///< GEMMs per trial; gathered bytes
};

/// How much of a collective hides behind compute, as the runtime overlaps
/// them (FSDP_PROGRESS_TEST: fsdp_event_query after every kernel): an
/// all-gather of 1 MiB alone (t_m), k GEMMs of the step (linear M×H→4H, k
/// chosen so that t_c ≈ t_m) alone (t_c), and the gather started before the
/// GEMMs and waited after them (t_both), on every rank at once, interleaved,
/// medians of max over ranks. overlap = (t_c + t_m − t_both) / min(t_c, t_m),
/// clamped to [0, 1]: 1 when the transfer costs the compute nothing. With
/// one rank: nothing measured, overlap 1.
Overlap measureOverlap(const Machine &mc, const Options &o, double budget);

struct Sync {
  /// Seconds per step, max over ranks, median of 3: with the collectives,
  /// compute only, collectives only; and sync, seconds per collective.
  double withCollectives = 0, computeOnly = 0, collectivesOnly = 0, sync = 0;
  /// Bytes of one all-gather; collectives per step (3L); steps per trial.
  int64_t bytes = 0, collectives = 0, iterations = 0;
};

/// What a collective costs beyond its own time when the ranks arrive from
/// compute rather than in lockstep (skew from time-slicing and OS noise:
/// Petrini, Kerbyson & Pakin, SC 2003; Hoefler, Schneider & Lumsdaine, SC
/// 2010), in FSDP's pattern without the interpreter: for L blocks (--layers)
/// a forward of [all-gather of one block's parameters, 4·(12H² + 13H) bytes,
/// started and waited; the block's forward kernels (layer norms, the four
/// linears, attention, GELU, residual adds)], then a backward of [the
/// gather; the block's kernels twice (a backward's work) with fsdp_event_query
/// on the previous reduce-scatter after every kernel, as the runtime's default
/// progress does; that reduce-scatter waited; this block's reduce-scatter
/// started], the last one waited. Run I times with no barrier between, the
/// same without collectives, and the collectives alone back to back:
/// sync = (T_with − T_compute − T_collectives) / (I · 3L), each T the max
/// over ranks, median of 3 trials. With one rank: nothing measured, 0.
Sync measureSync(const Machine &mc, const Options &o, double budget);

/// A GPT-2 transformer block's forward at the calibration's shapes (M =
/// o.rows token rows, hidden H = o.hidden, o.heads heads over o.seq tokens,
/// MLP 4H; f32, inputs random from `seed` and the rank): layer norm, QKV
/// linear, attention, projection, residual add, layer norm, fc, GELU, out,
/// residual add, the kernels the runtime's step runs for it
/// (fsdp/kernels.h). Shared by measureSync and measureShare.
class BlockForward {
public:
  BlockForward(const Machine &mc, const Options &o, uint32_t seed);
  /// Runs the block's kernels on the machine's stream, calling `poke` after
  /// each (the runtime's progress test between kernels).
  void run(const std::function<void()> &poke);

private:
  fsdp_stream stream;
  int64_t M, H, Bt, A, T;
  std::vector<float> x, ln, qkv, att, lse, proj, res, fc, act, out;
  std::vector<float> g, bb, wQkv, bQkv, wProj, bProj, wFc, bFc, wOut, bOut;
};

struct Share {
  /// waiting_rank_share: the share of a core a waiting rank takes relative
  /// to a working one; 1 when not measured (every rank has a core).
  double share = 1;
  int cores = 0, working = 0, waiting = 0; ///< the node's cores, the ranks
  int64_t iterations = 0;                  ///< blocks per trial
  /// Seconds per trial (max over the working ranks), waiting ranks in a
  /// receive / asleep, 5 trials each, interleaved.
  std::vector<double> waitingSeconds, sleepingSeconds;
};

/// With more ranks than online cores C (else nothing measured, share 1):
/// ranks 0..C-1 work (a GPT-2 block's forward kernels at the step's shapes,
/// as measureSync's, with fsdp_event_query on a receive in flight from each
/// of their waiting ranks after every kernel, as the runtime's progress
/// tests) while the w = N − C others wait in fsdp_wait on a receive from
/// them (trial "waiting") or sleep (trial "sleeping", not runnable), 5
/// trials each interleaved.
/// Processor sharing gives the working ranks C / (C + share·w) of a core
/// beside waiting ranks and all of it beside sleeping ones, so share =
/// C·(t_waiting / t_sleeping − 1) / w (medians of the ratio, ≥ 0; above 1
/// when the waiting ranks' polls and yields cost the working ranks more
/// than a working rank's share would).
Share measureShare(const Machine &mc, const Options &o, double budget);

struct Handover {
  bool measured = false;
  /// progress_yield_s: seconds one hand-over of a core between two ranks
  /// costs (the switch and the working set refilled); 0 when not measured.
  double seconds = 0;
  /// waiting_rank_share: the share of the core a rank polling and yielding
  /// in a wait takes from the working rank beside it; 1 when not measured.
  double share = 1;
  /// Whether the pair ran round-robin real-time (SCHED_RR), so that its
  /// yields went to each other alone.
  bool realtime = false;
  int64_t iterations = 0;    ///< blocks per trial
  int64_t testsPerBlock = 0; ///< progress tests (kernels) per block
  /// CPU seconds per trial (the pair's, summed: the shared core's busy
  /// seconds while rank 0 runs its blocks), 3 trials of each, interleaved.
  std::vector<double> yieldingSeconds, slicedSeconds, waitingSeconds,
      asleepSeconds;
};

/// With two ranks or more: ranks 0 and 1 pinned to the CPU rank 0 runs on
/// (sched_setaffinity; the others only join the barriers), both run I GPT-2
/// block forwards (BlockForward, as measureSync's) with the runtime's
/// progress test on a receive in flight after each kernel, followed by
/// sched_yield() as Open MPI's progress makes when oversubscribed
/// (opal_progress.c; "yielding") or not ("sliced": the OS time-slices the
/// two), and rank 0 alone runs them (yielding) while rank 1 polls a
/// receive with sched_yield() between tests ("waiting") or sleeps
/// ("asleep"); 3 trials of each, interleaved. Each t is the pair's CPU
/// seconds (CLOCK_THREAD_CPUTIME_ID, summed): on a core two ranks keep busy
/// they add up to its wall seconds, and other processes' slices on a loaded
/// machine stay out. seconds = (t_yielding −
/// t_sliced) / (2 · I · tests per block), share = t_waiting / t_asleep − 1
/// (one core, one working rank beside one waiting: 1 / (1 + share) of its
/// rate, processor sharing), medians, clamped to >= 0 and [0, 1]. Nothing
/// measured (seconds 0, share 1) with one rank or when a CPU cannot be
/// pinned. Where permitted the pair runs SCHED_RR meanwhile (sched(7)), so
/// that a yield hands the core to the other rank alone, as on a quiet node
/// (`realtime`); else other processes may run at the yields.
Handover measureHandover(const Machine &mc, const Options &o, double budget);

} // namespace fsdp::calibrate

#endif // FSDP_CALIBRATE_BENCHMARKS_H
