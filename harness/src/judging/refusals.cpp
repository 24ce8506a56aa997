#include "ctxscore/harness/refusals.hpp"

#include <algorithm>
#include <cstring>

#include "ctxscore/harness/backend.hpp"
#include "ctxscore/views.hpp"

namespace ctxscore::harness {

TensorRef RawTensor::ref() {
  TensorRef r = view;
  r.data = bytes.data();
  return r;
}

ScoreArgs RawCall::args() {
  ScoreArgs a;
  a.idx_q = idx_q.ref();
  a.index_cache = index_cache.ref();
  a.block_table = block_table.ref();
  a.seq_lens = seq_lens.ref();
  a.out = out.ref();
  a.max_seq_len = max_seq_len;
  a.rank = rank;
  a.world = world;
  a.max_query_len = max_query_len;
  a.sm_scale = sm_scale;
  return a;
}

namespace {

template <typename T>
RawTensor raw(const TensorRef& view, const std::vector<T>& storage) {
  RawTensor t;
  t.view = view;
  t.bytes.resize(storage.size() * sizeof(T));
  if (!t.bytes.empty()) std::memcpy(t.bytes.data(), storage.data(), t.bytes.size());
  return t;
}

// The elements a view reaches: 1 + the offset of its last element (0 when empty).
std::int64_t extent(const TensorRef& v) {
  std::int64_t last = 0;
  for (int d = 0; d < v.ndim; ++d) {
    if (v.shape[d] == 0) return 0;
    last += (v.shape[d] - 1) * v.strides[d];
  }
  return last + 1;
}

// Grows the storage, zero-filled, to hold the view: a backend that reads a
// view it should have refused reads memory of the call, not past it.
void fit_storage(RawTensor& t) {
  const std::size_t need = static_cast<std::size_t>(extent(t.view)) * dtype_size(t.view.dtype);
  if (t.bytes.size() < need) t.bytes.resize(need, 0);
}

void set_view(RawTensor& t, int ndim, std::initializer_list<std::int64_t> shape,
              std::initializer_list<std::int64_t> strides) {
  t.view.ndim = ndim;
  t.view.shape = {};
  t.view.strides = {};
  std::copy(shape.begin(), shape.end(), t.view.shape.begin());
  std::copy(strides.begin(), strides.end(), t.view.strides.begin());
  fit_storage(t);
}

// A storage in another dtype, its values converted where both are numbers of a kind.
void convert_bf16_to_f16(RawTensor& t) {
  const std::size_t n = t.bytes.size() / sizeof(bf16);
  std::vector<std::uint8_t> out(n * sizeof(Eigen::half));
  for (std::size_t e = 0; e < n; ++e) {
    bf16 b;
    std::memcpy(&b, t.bytes.data() + e * sizeof(bf16), sizeof b);
    const Eigen::half h(static_cast<float>(b));
    std::memcpy(out.data() + e * sizeof h, &h, sizeof h);
  }
  t.bytes = std::move(out);
  t.view.dtype = DType::f16;
}

void convert_i32_to_i64(RawTensor& t) {
  const std::size_t n = t.bytes.size() / sizeof(std::int32_t);
  std::vector<std::uint8_t> out(n * sizeof(std::int64_t));
  for (std::size_t e = 0; e < n; ++e) {
    std::int32_t v;
    std::memcpy(&v, t.bytes.data() + e * sizeof v, sizeof v);
    const std::int64_t w = v;
    std::memcpy(out.data() + e * sizeof w, &w, sizeof w);
  }
  t.bytes = std::move(out);
  t.view.dtype = DType::i64;
}

Device other_device(const Device& d) {
  return d.kind == Device::Kind::host ? Device{Device::Kind::gpu, 0} : Device{};
}

}  // namespace

RawCall raw_call(HostCase& host) {
  const ScoreArgs a = host.args();
  RawCall r;
  r.idx_q = raw(a.idx_q, host.q);
  r.index_cache = raw(a.index_cache, host.cache);
  r.block_table = raw(a.block_table, host.table);
  r.seq_lens = raw(a.seq_lens, host.lens);
  r.out = raw(*a.out, host.out);
  r.max_seq_len = a.max_seq_len;
  r.rank = a.rank;
  r.world = a.world;
  r.max_query_len = a.max_query_len;
  r.sm_scale = a.sm_scale;
  return r;
}

const std::vector<Breach>& breaches() {
  using C = Clause;
  static const std::vector<Breach> list = {
      {C::query_layout, "idx_q [T, H, 64]: a head dimension other than 128", false,
       [](RawCall& c) {
         const TensorRef& v = c.idx_q.view;
         set_view(c.idx_q, 3, {v.shape[0], v.shape[1], 64}, {v.strides[0], v.strides[1], 1});
         return true;
       }},
      {C::query_dtype, "idx_q in fp16, not bf16", false,
       [](RawCall& c) { convert_bf16_to_f16(c.idx_q); return true; }},
      {C::query_dim_stride, "idx_q with D stride 2", false,
       [](RawCall& c) {
         const TensorRef& v = c.idx_q.view;
         set_view(c.idx_q, 3, {v.shape[0], v.shape[1], 128}, {2 * v.strides[0], 2 * v.strides[1], 2});
         return true;
       }},
      {C::cache_layout, "index_cache [P, 128, 64]", false,
       [](RawCall& c) {
         set_view(c.index_cache, 3, {c.index_cache.view.shape[0], 128, 64}, {8192, 64, 1});
         return true;
       }},
      {C::cache_dtype, "index_cache in fp16, not bf16", false,
       [](RawCall& c) { convert_bf16_to_f16(c.index_cache); return true; }},
      {C::cache_contiguous, "index_cache with each page transposed: strides (16384, 1, 128)", false,
       [](RawCall& c) {
         set_view(c.index_cache, 3, {c.index_cache.view.shape[0], 128, 128}, {16384, 1, 128});
         return true;
       }},
      {C::cache_empty, "index_cache of 0 pages", false,
       [](RawCall& c) {
         set_view(c.index_cache, 3, {0, 128, 128}, {16384, 128, 1});
         return true;
       }},
      {C::table_layout, "block_table flattened to one dimension", false,
       [](RawCall& c) {
         const TensorRef& v = c.block_table.view;
         set_view(c.block_table, 1, {v.shape[0] * v.shape[1]}, {1});
         return true;
       }},
      {C::table_dtype, "block_table in int64, not int32", false,
       [](RawCall& c) { convert_i32_to_i64(c.block_table); return true; }},
      {C::table_column_stride, "block_table with column stride 2", false,
       [](RawCall& c) {
         const TensorRef& v = c.block_table.view;
         set_view(c.block_table, 2, {v.shape[0], v.shape[1]}, {2 * v.strides[0], 2});
         return true;
       }},
      {C::lengths_layout, "seq_lens [B, 1]", false,
       [](RawCall& c) {
         set_view(c.seq_lens, 2, {c.seq_lens.view.shape[0], 1}, {1, 1});
         return true;
       }},
      {C::lengths_dtype, "seq_lens in int64, not int32", false,
       [](RawCall& c) { convert_i32_to_i64(c.seq_lens); return true; }},
      {C::lengths_contiguous, "seq_lens with stride 2", false,
       [](RawCall& c) {
         set_view(c.seq_lens, 1, {c.seq_lens.view.shape[0]}, {2});
         return c.seq_lens.view.shape[0] >= 2;  // one request is dense at any stride
       }},
      {C::same_device, "seq_lens on another device than idx_q", true,
       [](RawCall& c) {
         c.seq_lens.view.device = other_device(c.idx_q.view.device);
         return true;
       }},
      {C::world, "world_size 0", false, [](RawCall& c) { c.world = 0; c.rank = 0; return true; }},
      {C::rank, "rank = world_size", false, [](RawCall& c) { c.rank = c.world; return true; }},
      {C::max_seq_len, "max_seq_len 0", false, [](RawCall& c) { c.max_seq_len = 0; return true; }},
      {C::max_query_len, "max_query_len 0", false, [](RawCall& c) { c.max_query_len = 0; return true; }},
      {C::heads, "idx_q with 0 heads", false,
       [](RawCall& c) {
         const TensorRef& v = c.idx_q.view;
         set_view(c.idx_q, 3, {v.shape[0], 0, 128}, {v.strides[0], v.strides[1], 1});
         return true;
       }},
      {C::tokens_vs_batch, "idx_q with one token more than B * max_query_len", false,
       [](RawCall& c) {
         const TensorRef& v = c.idx_q.view;
         set_view(c.idx_q, 3, {v.shape[0] + 1, v.shape[1], 128}, {v.strides[0], v.strides[1], 1});
         return true;
       }},
      {C::table_rows, "block_table with one row more than B", false,
       [](RawCall& c) {
         const TensorRef& v = c.block_table.view;
         set_view(c.block_table, 2, {v.shape[0] + 1, v.shape[1]}, {v.strides[0], 1});
         return true;
       }},
      {C::table_width, "block_table one column narrower than ceil(max_seq_len / 128)", false,
       [](RawCall& c) {
         const std::int64_t g = global_blocks(c.max_seq_len);
         const TensorRef& v = c.block_table.view;
         set_view(c.block_table, 2, {v.shape[0], g - 1}, {v.strides[0], 1});
         return g >= 2;
       }},
  };
  return list;
}

const std::vector<std::pair<Clause, std::string>>& clauses_not_breached() {
  static const std::vector<std::pair<Clause, std::string>> list = {
      {Clause::out_shape,
       "an out that does not fit is no refusal outside a capture: the call scores into a fresh buffer (fuzz and "
       "corpus pass one, out too_small)"},
      {Clause::out_in_capture,
       "refused only while a graph is being recorded; the kernel's own tests hold its launcher to it"},
      {Clause::geometry_override, "the harness's forced chunking, no argument of the operator"},
  };
  return list;
}

namespace {

bool same_storages(const RawCall& a, const RawCall& b, std::string& which) {
  const std::pair<const char*, std::pair<const RawTensor*, const RawTensor*>> all[] = {
      {"idx_q", {&a.idx_q, &b.idx_q}},           {"index_cache", {&a.index_cache, &b.index_cache}},
      {"block_table", {&a.block_table, &b.block_table}}, {"seq_lens", {&a.seq_lens, &b.seq_lens}},
      {"out", {&a.out, &b.out}}};
  for (const auto& [name, p] : all) {
    const std::vector<std::uint8_t>& x = p.first->bytes;
    const std::vector<std::uint8_t>& y = p.second->bytes;
    if (x.size() != y.size()) {
      which = std::string(name) + " came back with " + std::to_string(y.size()) + " bytes, " +
              std::to_string(x.size()) + " were sent";
      return false;
    }
    const auto at = std::mismatch(x.begin(), x.end(), y.begin());
    if (at.first != x.end()) {
      which = std::string(name) + " changed, first at byte " + std::to_string(at.first - x.begin()) + " of " +
              std::to_string(x.size());
      return false;
    }
  }
  return true;
}

// A backend that hung is no refusal verdict: the exception goes on to the
// caller, which records it as hung.
std::string what_was_sent(const RefusalFailure& f) {
  return f.clause ? std::string("clause ") + clause_name(*f.clause) + " (" + f.change + ")" : "the valid call";
}

RefusalFailure call_failed(std::optional<Clause> clause, const std::string& change, const std::exception& e) {
  RefusalFailure f{clause, change, RefusalFailure::Outcome::misbehaved, e.what()};
  if (dynamic_cast<const BackendHung*>(&e)) throw BackendHung(what_was_sent(f) + ": " + e.what());
  return f;
}

}  // namespace

const char* outcome_name(RefusalFailure::Outcome o) {
  using O = RefusalFailure::Outcome;
  switch (o) {
    case O::refused_valid: return "refused_valid";
    case O::misbehaved: return "misbehaved";
    case O::accepted: return "accepted";
    case O::fresh_buffer: return "fresh_buffer";
    case O::other_clause: return "other_clause";
    case O::wrote_before_refusing: return "wrote_before_refusing";
  }
  return "?";
}

std::string RefusalFailure::str() const {
  using O = Outcome;
  switch (outcome) {
    case O::refused_valid: return "refused a valid call: " + said;
    case O::misbehaved: return what_was_sent(*this) + ": the backend misbehaved: " + said;
    case O::accepted: return what_was_sent(*this) + ": accepted the call, expected a refusal";
    case O::fresh_buffer: return what_was_sent(*this) + ": refused, but returned a buffer of its own";
    case O::other_clause: return what_was_sent(*this) + ": refused for another clause, " + said;
    case O::wrote_before_refusing: return what_was_sent(*this) + ": refused, but wrote before refusing: " + said;
  }
  return what_was_sent(*this);
}

std::map<std::string, std::string> RefusalFailure::fields() const {
  return {{"clause", clause ? clause_name(*clause) : "none: the valid call"},
          {"outcome", outcome_name(outcome)},
          {"change", change},
          {"said", said}};
}

std::optional<RefusalFailure> judge_refusals(Backend& b, HostCase& host) {
  using O = RefusalFailure::Outcome;
  // The valid call first: a backend that refuses everything refuses nothing.
  try {
    RawCall valid = raw_call(host);
    const CallOutcome o = b.call(valid);
    if (o.refused) return RefusalFailure{std::nullopt, "", O::refused_valid, o.reason};
  } catch (const std::exception& e) {
    return call_failed(std::nullopt, "", e);
  }
  for (const Breach& br : breaches()) {
    if (br.moves_device && !b.capabilities().places_tensors) continue;
    RawCall call = raw_call(host);
    if (!br.apply(call)) continue;
    const RawCall sent = call;
    CallOutcome o;
    try {
      o = b.call(call);
    } catch (const std::exception& e) {
      return call_failed(br.clause, br.change, e);
    }
    if (!o.refused) return RefusalFailure{br.clause, br.change, O::accepted, ""};
    if (o.fresh) return RefusalFailure{br.clause, br.change, O::fresh_buffer, o.reason};
    if (o.clause && *o.clause != br.clause)
      return RefusalFailure{br.clause, br.change, O::other_clause, std::string(clause_name(*o.clause)) + ": " + o.reason};
    if (std::string which; !same_storages(sent, call, which))
      return RefusalFailure{br.clause, br.change, O::wrote_before_refusing, which};
  }
  return std::nullopt;
}

}  // namespace ctxscore::harness
