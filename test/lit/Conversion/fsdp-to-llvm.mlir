// --convert-fsdp-to-llvm on a small scheduled step (one linear unit, 2 ranks).
// The arena offsets and sizes the calls use are checked against the JSON
// schedule of the same IR (its memory plan), printed first as PLAN lines:
// every buffer is arena + its planned offset, the all-gather starts into an
// event slot, the progress test runs while it is in flight, and the compute
// stream waits on it before the linear reads the gathered parameters.
// RUN: fsdp-opt %s --fsdp-pipeline="world-size=2" -o %t.mlir
// RUN: fsdp-translate %t.mlir --fsdp-to-schedule | %python -c "import json,sys; \
// RUN: s=json.load(sys.stdin); b={x['id']: x for x in s['buffers']}; \
// RUN: root=lambda i: root(b[i]['view_of']) if 'view_of' in b[i] else i; \
// RUN: off=lambda i: b[root(i)]['arena_offset'] + b[i].get('offset', 0) * 4; \
// RUN: x=s['inputs'][0]['buffer']; print('PLAN features', off(x), b[x]['bytes']); \
// RUN: ag=[i for i in s['instructions'] if i['op'] == 'fsdp.all_gather'][0]; \
// RUN: print('PLAN all_gather', off(ag['operands'][0]), off(ag['results'][0]), b[ag['operands'][0]]['shape'][0]); \
// RUN: ln=[i for i in s['instructions'] if i['op'] == 'nn.linear'][0]; \
// RUN: print('PLAN linear', ' '.join(str(off(v)) for v in ln['operands'] + ln['results'])); \
// RUN: rs=[i for i in s['instructions'] if i['op'] == 'fsdp.reduce_scatter'][0]; \
// RUN: print('PLAN reduce_scatter', off(rs['operands'][0]), off(rs['results'][0]), b[rs['results'][0]]['shape'][0]); \
// RUN: print('PLAN arena', s['memory_plan']['arena_bytes'])" > %t.plan
// RUN: cat %t.plan > %t.all && fsdp-opt %t.mlir --convert-fsdp-to-llvm >> %t.all && FileCheck %s < %t.all

// CHECK: PLAN features [[XOFF:[0-9]+]] [[XBYTES:[0-9]+]]
// CHECK: PLAN all_gather [[AGS:[0-9]+]] [[AGD:[0-9]+]] [[AGN:[0-9]+]]
// CHECK: PLAN linear [[LX:[0-9]+]] [[LW:[0-9]+]] [[LB:[0-9]+]] [[LY:[0-9]+]]
// CHECK: PLAN reduce_scatter {{[0-9]+}} {{[0-9]+}} [[RSN:[0-9]+]]
// CHECK: PLAN arena [[ARENA_BYTES:[0-9]+]]

// The kernels are declared as the C API has them (kernels.h).
// CHECK-DAG: llvm.func @fsdp_linear(!llvm.ptr, i32, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i64, i64, i32) -> i32
// CHECK-DAG: llvm.func @fsdp_all_gather_start(!llvm.ptr, !llvm.ptr, !llvm.ptr, i64, i32, !llvm.ptr) -> i32
// CHECK-DAG: llvm.func @fsdp_wait(!llvm.ptr) -> i32

// The context's fields (compiled.h): stream at 8, arena at 16, the shard
// channel at 32, the event slots at 48.
// CHECK: llvm.func @fsdp_step(%[[CTX:.*]]: !llvm.ptr, %[[IN:.*]]: !llvm.ptr, %[[OUT:.*]]: !llvm.ptr) -> i32
// CHECK: %[[C8:.*]] = llvm.mlir.constant(8 : i64)
// CHECK-NEXT: %[[P8:.*]] = llvm.getelementptr %[[CTX]][%[[C8]]]
// CHECK-NEXT: %[[STREAM:.*]] = llvm.load %[[P8]] : !llvm.ptr -> !llvm.ptr
// CHECK-NEXT: %[[C16:.*]] = llvm.mlir.constant(16 : i64)
// CHECK-NEXT: %[[P16:.*]] = llvm.getelementptr %[[CTX]][%[[C16]]]
// CHECK-NEXT: %[[ARENA:.*]] = llvm.load %[[P16]] : !llvm.ptr -> !llvm.ptr
// CHECK: %[[C32:.*]] = llvm.mlir.constant(32 : i64)
// CHECK-NEXT: %[[P32:.*]] = llvm.getelementptr %[[CTX]][%[[C32]]]
// CHECK-NEXT: %[[SHARD:.*]] = llvm.load %[[P32]] : !llvm.ptr -> !llvm.ptr
// CHECK: %[[C48:.*]] = llvm.mlir.constant(48 : i64)
// CHECK-NEXT: %[[P48:.*]] = llvm.getelementptr %[[CTX]][%[[C48]]]
// CHECK-NEXT: %[[EVENTS:.*]] = llvm.load %[[P48]] : !llvm.ptr -> !llvm.ptr
// CHECK: llvm.call @fsdp_get_progress()

// The features (input 0) are copied from the host to their arena slot.
// CHECK: %[[I0:.*]] = llvm.getelementptr %[[IN]][%{{.*}}] : (!llvm.ptr, i64) -> !llvm.ptr, !llvm.ptr
// CHECK-NEXT: %[[SRC:.*]] = llvm.load %[[I0]]
// CHECK-NEXT: %[[XO:.*]] = llvm.mlir.constant([[XOFF]] : i64)
// CHECK-NEXT: %[[X:.*]] = llvm.getelementptr %[[ARENA]][%[[XO]]]
// CHECK-NEXT: %[[XN:.*]] = llvm.mlir.constant([[XBYTES]] : i64)
// CHECK-NEXT: %[[RC:.*]] = llvm.call @fsdp_memcpy(%[[STREAM]], %[[X]], %[[SRC]], %[[XN]])
// CHECK: llvm.icmp "ne" %[[RC]]
// CHECK-NEXT: llvm.cond_br %{{.*}}, ^[[ERR:bb[0-9]+]](%[[RC]] : i32), ^bb
// CHECK: ^[[ERR]](%[[E:.*]]: i32):
// CHECK-NEXT: llvm.return %[[E]] : i32

// The all-gather of the unit's shard: arena + offset to arena + offset, its
// event in slot 0.
// CHECK: %[[AGSO:.*]] = llvm.mlir.constant([[AGS]] : i64)
// CHECK-NEXT: %[[AGSP:.*]] = llvm.getelementptr %[[ARENA]][%[[AGSO]]]
// CHECK-NEXT: %[[AGDO:.*]] = llvm.mlir.constant([[AGD]] : i64)
// CHECK-NEXT: %[[AGDP:.*]] = llvm.getelementptr %[[ARENA]][%[[AGDO]]]
// CHECK-NEXT: %[[S0:.*]] = llvm.mlir.constant(0 : i64)
// CHECK-NEXT: %[[SLOT0:.*]] = llvm.getelementptr %[[EVENTS]][%[[S0]]] : (!llvm.ptr, i64) -> !llvm.ptr, !llvm.ptr
// CHECK-NEXT: %[[AGNV:.*]] = llvm.mlir.constant([[AGN]] : i64)
// CHECK-NEXT: %[[F32:.*]] = llvm.mlir.constant(0 : i32)
// CHECK-NEXT: llvm.call @fsdp_all_gather_start(%[[SHARD]], %[[AGSP]], %[[AGDP]], %[[AGNV]], %[[F32]], %[[SLOT0]])
// In flight: one progress test per instruction in FSDP_PROGRESS_TEST mode.
// CHECK: llvm.call @fsdp_event_query
// Its wait, before the linear: the slot's event, then the slot cleared.
// CHECK: llvm.call @fsdp_wait(%{{.*}})
// CHECK-NEXT: %[[NULL:.*]] = llvm.mlir.zero : !llvm.ptr
// CHECK-NEXT: llvm.store %[[NULL]], %{{.*}} : !llvm.ptr, !llvm.ptr
// CHECK-NOT: fsdp_all_gather_start
// The linear on the gathered weight and bias: m = 2 rows per rank, k = 4, n = 3.
// CHECK: llvm.mlir.constant([[LX]] : i64)
// CHECK-NEXT: %[[LXP:.*]] = llvm.getelementptr %[[ARENA]]
// CHECK-NEXT: llvm.mlir.constant([[LW]] : i64)
// CHECK-NEXT: %[[LWP:.*]] = llvm.getelementptr %[[ARENA]]
// CHECK-NEXT: llvm.mlir.constant([[LB]] : i64)
// CHECK-NEXT: %[[LBP:.*]] = llvm.getelementptr %[[ARENA]]
// CHECK-NEXT: llvm.mlir.constant([[LY]] : i64)
// CHECK-NEXT: %[[LYP:.*]] = llvm.getelementptr %[[ARENA]]
// CHECK-NEXT: %[[M:.*]] = llvm.mlir.constant(2 : i64)
// CHECK-NEXT: %[[K:.*]] = llvm.mlir.constant(4 : i64)
// CHECK-NEXT: %[[N:.*]] = llvm.mlir.constant(3 : i64)
// CHECK-NEXT: %[[TW:.*]] = llvm.mlir.constant(0 : i32)
// CHECK-NEXT: llvm.call @fsdp_linear(%[[STREAM]], %{{.*}}, %[[LXP]], %[[LWP]], %[[LBP]], %[[LYP]], %[[M]], %[[K]], %[[N]], %[[TW]])
// The gradient's reduce-scatter (average: 1) into slot 1, waited on before the
// AdamW update (fsdp_optimizer_update, as the Executor) reads the reduced gradient.
// CHECK: %[[SLOT1:.*]] = llvm.getelementptr %[[EVENTS]][%[[S1:.*]]] : (!llvm.ptr, i64) -> !llvm.ptr, !llvm.ptr
// CHECK-NEXT: llvm.mlir.constant([[RSN]] : i64)
// CHECK-NEXT: llvm.mlir.constant(0 : i32)
// CHECK-NEXT: %[[AVG:.*]] = llvm.mlir.constant(1 : i32)
// CHECK-NEXT: llvm.call @fsdp_reduce_scatter_start(%[[SHARD]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[AVG]], %[[SLOT1]])
// CHECK: llvm.call @fsdp_wait
// CHECK: llvm.call @fsdp_optimizer_update(
// The outputs' device pointers, then success.
// CHECK: llvm.store %{{.*}}, %{{.*}} : !llvm.ptr, !llvm.ptr
// CHECK: %[[OK:.*]] = llvm.mlir.constant(0 : i32)
// CHECK-NEXT: llvm.return %[[OK]] : i32

// The descriptor: ABI 3, format version 2, world size 2, grid 1 x 2, the
// arena, 2 event slots, the schedule document.
// CHECK: llvm.mlir.global private constant @fsdp_step_schedule("{\0A \22format\22: \22fsdp-schedule\22
// CHECK: llvm.mlir.global private constant @fsdp_step_descriptor()
// CHECK: llvm.mlir.constant(3 : i32)
// CHECK-NEXT: llvm.insertvalue %{{.*}}[0]
// CHECK-NEXT: llvm.mlir.constant(2 : i32)
// CHECK-NEXT: llvm.insertvalue
// CHECK-NEXT: %[[WS:.*]] = llvm.mlir.constant(2 : i64)
// CHECK-NEXT: llvm.insertvalue %[[WS]], %{{.*}}[2]
// CHECK-NEXT: llvm.mlir.constant(1 : i64)
// CHECK-NEXT: llvm.insertvalue %{{.*}}[3]
// CHECK-NEXT: llvm.mlir.constant(2 : i64)
// CHECK-NEXT: llvm.insertvalue %{{.*}}[4]
// CHECK-NEXT: llvm.mlir.constant([[ARENA_BYTES]] : i64)
// CHECK-NEXT: llvm.insertvalue %{{.*}}[5]
// CHECK: llvm.func @fsdp_step_describe() -> !llvm.ptr
// CHECK-NEXT: llvm.mlir.addressof @fsdp_step_descriptor

func.func @f(%x: tensor<4x4xf32> {nn.data = "features"}, %y: tensor<4xi32> {nn.data = "labels"},
             %w1: tensor<3x4xf32> {nn.param = "fc1.weight"}, %b1: tensor<3xf32> {nn.param = "fc1.bias"})
    -> (tensor<f32> {nn.loss}) {
  %h = nn.linear %x, %w1, %b1 : (tensor<4x4xf32>, tensor<3x4xf32>, tensor<3xf32>) -> tensor<4x3xf32>
  %l = nn.cross_entropy %h, %y : (tensor<4x3xf32>, tensor<4xi32>) -> tensor<f32>
  return %l : tensor<f32>
}
