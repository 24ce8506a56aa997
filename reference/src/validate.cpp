#include "ctxscore/validate.hpp"

#include <sstream>

namespace ctxscore {

const char* clause_name(Clause c) {
  switch (c) {
    case Clause::query_layout: return "query_layout";
    case Clause::query_dtype: return "query_dtype";
    case Clause::query_dim_stride: return "query_dim_stride";
    case Clause::cache_layout: return "cache_layout";
    case Clause::cache_dtype: return "cache_dtype";
    case Clause::cache_contiguous: return "cache_contiguous";
    case Clause::cache_empty: return "cache_empty";
    case Clause::table_layout: return "table_layout";
    case Clause::table_dtype: return "table_dtype";
    case Clause::table_column_stride: return "table_column_stride";
    case Clause::lengths_layout: return "lengths_layout";
    case Clause::lengths_dtype: return "lengths_dtype";
    case Clause::lengths_contiguous: return "lengths_contiguous";
    case Clause::same_device: return "same_device";
    case Clause::world: return "world";
    case Clause::rank: return "rank";
    case Clause::max_seq_len: return "max_seq_len";
    case Clause::max_query_len: return "max_query_len";
    case Clause::heads: return "heads";
    case Clause::tokens_vs_batch: return "tokens_vs_batch";
    case Clause::table_rows: return "table_rows";
    case Clause::table_width: return "table_width";
    case Clause::out_shape: return "out_shape";
    case Clause::out_in_capture: return "out_in_capture";
    case Clause::geometry_override: return "geometry_override";
  }
  return "?";
}

namespace {

[[noreturn]] void fail(Clause c, const std::string& arg, const std::string& seen,
                       const std::string& expected) {
  throw ContractError(c, arg + ": got " + seen + ", expected " + expected);
}

std::string describe(const TensorRef& t) {
  return std::string(dtype_name(t.dtype)) + " " + t.shape_str() + " strides " + t.strides_str() +
         " on " + t.device.str();
}

// Shapes and strides that no tensor can have: part of each tensor's layout clause.
void check_well_formed(const TensorRef& t, Clause c, const char* arg) {
  for (int d = 0; d < t.ndim; ++d) {
    if (t.shape[d] < 0) fail(c, arg, describe(t), "non-negative sizes");
    if (t.strides[d] < 0) fail(c, arg, describe(t), "non-negative strides");
  }
  if (t.data == nullptr && t.ndim > 0 && t.numel() > 0)
    fail(c, arg, "a null data pointer for " + describe(t), "a buffer");
}

std::string num(std::int64_t v) { return std::to_string(v); }

}  // namespace

void check_layout(const ScoreArgs& a) {
  const TensorRef& q = a.idx_q;
  if (q.ndim != 3 || q.shape[2] != kHeadDim)
    fail(Clause::query_layout, "idx_q", describe(q), "[tokens, heads, 128]");
  check_well_formed(q, Clause::query_layout, "idx_q");
  if (q.dtype != DType::bf16) fail(Clause::query_dtype, "idx_q", dtype_name(q.dtype), "bf16");
  if (q.strides[2] != 1)
    fail(Clause::query_dim_stride, "idx_q", "D stride " + num(q.strides[2]), "D stride 1 (contiguous D)");

  const TensorRef& k = a.index_cache;
  if (k.ndim != 3 || k.shape[1] != kBlockTokens || k.shape[2] != kHeadDim)
    fail(Clause::cache_layout, "index_cache", describe(k), "[pages, 128, 128]");
  check_well_formed(k, Clause::cache_layout, "index_cache");
  if (k.shape[0] < 1) fail(Clause::cache_empty, "index_cache", num(k.shape[0]) + " pages", "at least 1 page");
  if (!k.contiguous())
    fail(Clause::cache_contiguous, "index_cache", "strides " + k.strides_str(),
         "contiguous strides (16384, 128, 1)");
  if (k.dtype != DType::bf16)
    fail(Clause::cache_dtype, "index_cache", dtype_name(k.dtype),
         "bf16 (this score loop applies no per-token scale, so fp8 caches are rejected)");

  const TensorRef& bt = a.block_table;
  if (bt.ndim != 2) fail(Clause::table_layout, "block_table", describe(bt), "2 dims [batch, width]");
  check_well_formed(bt, Clause::table_layout, "block_table");
  if (bt.dtype != DType::i32) fail(Clause::table_dtype, "block_table", dtype_name(bt.dtype), "i32");
  if (bt.strides[1] != 1)
    fail(Clause::table_column_stride, "block_table", "column stride " + num(bt.strides[1]), "column stride 1");

  const TensorRef& sl = a.seq_lens;
  if (sl.ndim != 1) fail(Clause::lengths_layout, "seq_lens", describe(sl), "1 dim [batch]");
  check_well_formed(sl, Clause::lengths_layout, "seq_lens");
  if (sl.dtype != DType::i32) fail(Clause::lengths_dtype, "seq_lens", dtype_name(sl.dtype), "i32");
  if (!sl.contiguous()) fail(Clause::lengths_contiguous, "seq_lens", "stride " + sl.strides_str(), "stride (1)");

  const std::pair<const char*, const TensorRef*> others[] = {
      {"index_cache", &k}, {"block_table", &bt}, {"seq_lens", &sl}};
  for (const auto& [name, t] : others)
    if (t->device != q.device)
      fail(Clause::same_device, name, "device " + t->device.str(), "idx_q's device " + q.device.str());
}

Layout check_call(const ScoreArgs& a) {
  if (a.world < 1) fail(Clause::world, "world", num(a.world), ">= 1");
  if (a.rank < 0 || a.rank >= a.world)
    fail(Clause::rank, "rank", num(a.rank), "0 <= rank < world = " + num(a.world));
  if (a.max_seq_len < 1) fail(Clause::max_seq_len, "max_seq_len", num(a.max_seq_len), ">= 1");
  if (a.max_query_len < 1) fail(Clause::max_query_len, "max_query_len", num(a.max_query_len), ">= 1");
  Layout l;
  l.tokens = a.idx_q.shape[0];
  l.heads = a.idx_q.shape[1];
  l.batch = a.seq_lens.shape[0];
  l.pages = a.index_cache.shape[0];
  l.table_width = a.block_table.shape[1];
  if (l.heads < 1) fail(Clause::heads, "idx_q", "heads = " + num(l.heads), "heads >= 1");
  if (l.tokens != l.batch * a.max_query_len)
    fail(Clause::tokens_vs_batch, "idx_q", "tokens = " + num(l.tokens),
         "batch * max_query_len = " + num(l.batch) + " * " + num(a.max_query_len) + " = " +
             num(l.batch * a.max_query_len));
  if (a.block_table.shape[0] != l.batch)
    fail(Clause::table_rows, "block_table", "rows = " + num(a.block_table.shape[0]),
         "rows == batch = " + num(l.batch));
  l.geometry = launch_geometry(l.batch, a.max_seq_len, a.world, l.heads, a.max_query_len);
  if (l.table_width < l.geometry.global)
    fail(Clause::table_width, "block_table", "width = " + num(l.table_width),
         "width >= ceil(max_seq_len / 128) = " + num(l.geometry.global));
  return l;
}

Layout validate(const ScoreArgs& a) {
  check_layout(a);
  return check_call(a);
}

bool out_fits(const ScoreArgs& a, const Layout& l) {
  if (!a.out) return false;
  const TensorRef& o = *a.out;
  return o.ndim == 3 && o.shape[0] == l.heads && o.shape[1] >= l.tokens &&
         o.shape[2] >= l.geometry.local && o.dtype == DType::f32 && o.device == a.idx_q.device &&
         o.data != nullptr && o.strides[0] >= 0 && o.strides[1] >= 0 && o.strides[2] >= 0;
}

std::string out_requirement(const ScoreArgs& a, const Layout& l) {
  std::ostringstream s;
  s << "got ";
  if (a.out) s << describe(*a.out);
  else s << "no out";
  s << "; need f32 [heads=" << l.heads << ", >=tokens=" << l.tokens << ", >=local=" << l.geometry.local
    << "] on " << a.idx_q.device.str();
  return s.str();
}

OutDecision decide_out(const ScoreArgs& a, const Layout& l, bool capturing) {
  OutDecision d;
  if (out_fits(a, l)) {
    d.use_given = true;
    return d;
  }
  if (a.out && capturing)
    throw ContractError(Clause::out_in_capture,
                        "out: does not fit while the stream is capturing (no allocation inside a capture): " +
                            out_requirement(a, l));
  d.fresh_reason = a.out ? "out does not fit, scoring into a fresh buffer: " + out_requirement(a, l)
                         : "no out given";
  return d;
}

Geometry apply_override(const Geometry& g, const GeometryOverride& o) {
  if (o.chunk < 1)
    throw ContractError(Clause::geometry_override, "geometry.chunk: got " + num(o.chunk) + ", expected >= 1");
  if (o.grid_y < 1 || o.grid_y * o.chunk < g.local)
    throw ContractError(Clause::geometry_override,
                        "geometry.grid_y: got " + num(o.grid_y) + " with chunk " + num(o.chunk) +
                            ", expected grid_y >= 1 and grid_y * chunk >= local slots = " + num(g.local));
  Geometry r = g;
  r.chunk = o.chunk;
  r.grid_y = o.grid_y;
  r.chunks = o.grid_y;
  return r;
}

}  // namespace ctxscore
