/* The C interface of a native port: a shared library exporting these four
 * functions is served to the harness by `ctxscore-native-port LIBRARY`
 * (fixtures/PROTOCOL.md), so C, C++, HIP and CUDA implementations need no
 * Python. The call mirrors upstream's signature; tensors are views (element
 * strides) into memory the worker allocated: host memory, or GPU memory
 * when the library asks for it. */
#ifndef CTXSCORE_NATIVE_PORT_H
#define CTXSCORE_NATIVE_PORT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CTXSCORE_NATIVE_PORT_ABI 1

typedef struct {
  void* data;          /* the view's first element */
  int ndim;            /* 1..3 */
  int64_t shape[3];
  int64_t strides[3];  /* in elements */
} ctxscore_tensor;

typedef struct {
  ctxscore_tensor idx_q;        /* bf16 bits [T, H, 128] */
  ctxscore_tensor index_cache;  /* bf16 bits [P, 128, 128] */
  ctxscore_tensor block_table;  /* int32 [B, Wt] */
  ctxscore_tensor seq_lens;     /* int32 [B] */
  int64_t max_seq_len, rank, world_size, max_query_len;
  double sm_scale;
  int has_out;                  /* 0: out=None */
  ctxscore_tensor out;          /* fp32 [H, rows, slots], any strides; may not fit */
  void* stream;                 /* the GPU stream to launch on (memory 1), else NULL */
  /* Set by the library when it scored into a buffer of its own (no out, or
   * one that does not fit): dense fp32 [H, T, L] in its memory kind. */
  float* fresh;
  int64_t fresh_shape[3];
} ctxscore_call;

/* The port's name, for reports. */
const char* ctxscore_port_name(void);
/* 0: the tensors live in host memory; 1: in GPU memory. */
int ctxscore_port_memory(void);
/* Scores one call, synchronously. 0 on success; otherwise nonzero with a
 * message in `error` (the harness reports it). */
int ctxscore_port_score(ctxscore_call* call, char* error, size_t error_size);
/* Frees call->fresh (when set). */
void ctxscore_port_release(ctxscore_call* call);

#ifdef __cplusplus
}
#endif

#endif
