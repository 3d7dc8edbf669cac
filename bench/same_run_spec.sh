# Sourced by bench/tp_vs_simulator.sh and bench/pp_vs_simulator.sh: sets SPEC,
# the cluster spec the layouts are planned with. Given (SPEC=...), it is kept;
# else (CALIBRATE=1, the default) fsdp-calibrate runs now, side by side with
# the measurements, into $OUT/spec.json; with ANALYZE_ONLY the one calibrated
# then is reused; else bench/clusters/this-machine.json. Needs B (the tools'
# directory), OUT and LAYOUTS (each world:..., the world size first).
[ -n "${SPEC:-}" ] && CALIBRATE=0
if [ -z "${ANALYZE_ONLY:-}" ] && [ "${CALIBRATE:-1}" = 1 ]; then
  nmax=1
  for l in $LAYOUTS; do n=${l%%:*}; [ "$n" -gt "$nmax" ] && nmax=$n; done
  # Ranks <= cores (docs/collective-model.md, "Oversubscription": the skew
  # measured oversubscribed is the polling ranks', not a rank's), the node's
  # ranks as the layouts run them.
  cores=$(getconf _NPROCESSORS_ONLN) # (nproc obeys OMP_NUM_THREADS)
  nc=$(( nmax < cores ? nmax : cores ))
  python3 bench/quiet_run.py -- mpirun --allow-run-as-root --oversubscribe -np "$nc" \
    "$B/fsdp-calibrate" --devices-per-node "$nmax" -o "$OUT/spec.json" 2> "$OUT/calibrate.err"
  echo "calibrated at $nc ranks: $(tail -1 "$OUT/calibrate.err")" >&2
  SPEC=$OUT/spec.json
elif [ -z "${SPEC:-}" ] && [ -n "${ANALYZE_ONLY:-}" ] && [ -f "$OUT/spec.json" ]; then
  SPEC=$OUT/spec.json
fi
SPEC=${SPEC:-bench/clusters/this-machine.json}
