// graphbug's shim over libtorch's boxed dispatcher.
//
// Ops are looked up by name and called through `OperatorHandle::callBoxed`, so every aten op
// runs without a hand-written table. A "plan" is a prepared argument stack for one node:
// constants are converted to IValues once, and tensor arguments are "holes" filled on each
// call. Every entry point catches C++ exceptions and returns them as a malloc'd message
// (nullptr on success); nothing throws across the FFI boundary.

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/util/Exception.h>
#include <c10/core/GradMode.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/headeronly/version.h>
#include <torch/library.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <thread>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>
#include <mutex>
#include <optional>
#include <tuple>
#include <unordered_map>
#include <sstream>
#include <string>
#include <vector>

namespace {

using Stack = std::vector<c10::IValue>;

char* dup_str(const std::string& s) {
  char* p = static_cast<char*>(std::malloc(s.size() + 1));
  if (p != nullptr) {
    std::memcpy(p, s.data(), s.size());
    p[s.size()] = '\0';
  }
  return p;
}

// Runs `f`, turning any exception into an error message.
template <typename F>
char* guarded(F&& f) {
  try {
    f();
    return nullptr;
  } catch (const c10::Error& e) {
    return dup_str(e.what_without_backtrace());
  } catch (const std::exception& e) {
    return dup_str(e.what());
  } catch (...) {
    return dup_str("unknown C++ exception");
  }
}

void json_str(std::ostream& o, const std::string& s) {
  o << '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': o << "\\\""; break;
      case '\\': o << "\\\\"; break;
      case '\n': o << "\\n"; break;
      case '\r': o << "\\r"; break;
      case '\t': o << "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          o << buf;
        } else {
          o << c;
        }
    }
  }
  o << '"';
}

void json_arg(std::ostream& o, const c10::Argument& a) {
  o << "{\"name\":";
  json_str(o, a.name());
  // real_type() is the declared type (ScalarType, Layout, SymInt, ...); type() is the
  // JIT type it is stored as (int).
  o << ",\"type\":";
  json_str(o, a.real_type()->str());
  o << ",\"n\":";
  if (a.N()) {
    o << *a.N();
  } else {
    o << "null";
  }
  o << ",\"kwarg_only\":" << (a.kwarg_only() ? "true" : "false");
  o << ",\"default\":";
  if (a.default_value()) {
    std::ostringstream d;
    d << *a.default_value();
    json_str(o, d.str());
  } else {
    o << "null";
  }
  const c10::AliasInfo* alias = a.alias_info();
  o << ",\"is_write\":" << (alias != nullptr && alias->isWrite() ? "true" : "false");
  o << ",\"alias_set\":[";
  if (alias != nullptr) {
    bool first = true;
    for (const auto& sym : alias->beforeSets()) {
      if (!first) o << ',';
      first = false;
      json_str(o, sym.toUnqualString());
    }
  }
  // Alias sets of list elements, as in `Tensor(a)[]`.
  o << "],\"contained_alias_set\":[";
  if (alias != nullptr) {
    bool first = true;
    for (const auto& inner : alias->containedTypes()) {
      for (const auto& sym : inner.beforeSets()) {
        if (!first) o << ',';
        first = false;
        json_str(o, sym.toUnqualString());
      }
    }
  }
  o << "]}";
}

// What a hole in a plan's stack takes from the call's tensor array.
struct Hole {
  size_t pos;
  enum Kind { kTensor, kTensorList, kOptTensorList } kind;
  std::vector<uint8_t> present;  // list holes: 1 = a tensor from the array, 0 = None
};

struct Plan {
  c10::OperatorHandle op;
  Stack tmpl;
  std::vector<Hole> holes;
  size_t n_tensors = 0;
  explicit Plan(const c10::OperatorHandle& h) : op(h) {}
};

Plan& plan_of(void* p) { return *static_cast<Plan*>(p); }

// graphbug::fault(Tensor self, str kind, float amount, str message) -> Tensor
// Fault injection as an op: backends that run graphs through the dispatcher execute it like
// any other op. On meta tensors it passes the shape through, so shape inference never fires it.
at::Tensor fault_kernel(const at::Tensor& self, c10::string_view kind, double amount,
                        c10::string_view message) {
  const std::string msg(message);
  if (self.is_meta()) return self.clone();
  if (kind == "runtime") {
    TORCH_CHECK(false, msg);
  }
  if (kind == "accuracy") {
    if (self.is_floating_point() || self.is_complex()) return self + amount;
    if (self.scalar_type() == at::kBool) return self.logical_not();
    return self + static_cast<int64_t>(std::max(1.0, std::round(amount)));
  }
  if (kind == "nan") {
    TORCH_CHECK(self.is_floating_point(), msg, ": a nan fault needs a floating tensor, got ",
                self.scalar_type());
    return at::full_like(self, std::numeric_limits<double>::quiet_NaN());
  }
  // Schema-breaking kinds, to test checking backends such as eager_debug.
  if (kind == "alias") return self;                          // undeclared aliasing
  if (kind == "mutate") {                                    // undeclared mutation
    at::Tensor copy = self.clone();
    self.add_(1);
    return copy;
  }
  if (kind == "shape") return self.reshape({-1}).clone();    // not the declared shape
  if (kind == "crash") {
    std::fprintf(stderr, "%s: aborting the process\n", msg.c_str());
    std::fflush(stderr);
    std::abort();
  }
  if (kind == "hang") {
    std::fprintf(stderr, "%s: hanging forever\n", msg.c_str());
    std::fflush(stderr);
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  TORCH_CHECK(false, "unknown fault kind `", kind, "`");
}
Stack& stack_of(void* s) { return *static_cast<Stack*>(s); }

// ---- recording libtorch's autograd ----
//
// A Recorder notes every aten call that reaches the TESTING_ONLY_GenericMode key while it
// is on: the op, its arguments (tensors by recorded id) and its results. The mode key sits
// above Autograd, so a call is seen as the caller made it; calls made inside a recorded
// call (its kernels' own at:: calls) pass through unrecorded, and CompositeImplicitAutograd
// ops without an autograd kernel are not recorded themselves but decompose into calls that
// are, as AOTAutograd's tracing decomposes them. The autograd engine carries the
// thread-local dispatch keys into the backward, so the backward's calls are recorded too.

// A tensor's identity when its TensorImpl differs (saved outputs are shallow copies).
using StorageKey = std::tuple<const void*, int64_t, std::vector<int64_t>, std::vector<int64_t>, int>;

struct Recorder {
  bool on = false;
  int depth = 0;
  int phase = 0;
  std::vector<at::Tensor> keep;  // every recorded tensor, so addresses stay unique
  std::unordered_map<const c10::TensorImpl*, int64_t> by_impl;
  std::map<StorageKey, int64_t> by_storage;
  int64_t next_id = 0;
  std::ostringstream calls;
  bool any_call = false;
  std::vector<std::pair<std::string, int64_t>> labels;
  std::vector<int64_t> results;
  // The most bytes the CPU stand-ins of one call's meta tensors may take (see
  // `call_on_cpu_stand_ins`).
  uint64_t stand_in_limit = 0;
};

thread_local Recorder* tls_recorder = nullptr;

std::optional<StorageKey> storage_key(const at::Tensor& t) {
  if (!t.has_storage() || t.is_sparse()) return std::nullopt;
  return StorageKey(t.storage().unsafeGetStorageImpl(), t.storage_offset(), t.sizes().vec(),
                    t.strides().vec(), static_cast<int>(t.scalar_type()));
}

int64_t assign_id(Recorder& r, const at::Tensor& t) {
  int64_t id = r.next_id++;
  r.keep.push_back(t);
  r.by_impl[t.unsafeGetTensorImpl()] = id;
  if (auto k = storage_key(t)) r.by_storage[*k] = id;
  return id;
}

std::optional<int64_t> find_id(const Recorder& r, const at::Tensor& t) {
  auto i = r.by_impl.find(t.unsafeGetTensorImpl());
  if (i != r.by_impl.end()) return i->second;
  if (auto k = storage_key(t)) {
    auto j = r.by_storage.find(*k);
    if (j != r.by_storage.end()) return j->second;
  }
  return std::nullopt;
}

void json_double(std::ostream& o, double d) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", d);
  o << "{\"f\":\"" << buf << "\"}";
}

// A complex number: {"c": [{"f": re}, {"f": im}]}.
void json_complex(std::ostream& o, c10::complex<double> z) {
  o << "{\"c\":[";
  json_double(o, z.real());
  o << ',';
  json_double(o, z.imag());
  o << "]}";
}

// Writes `items` as a JSON array, each element by `each`.
template <typename Items, typename Each>
void json_list(std::ostream& o, const Items& items, Each each) {
  o << '[';
  bool first = true;
  for (const auto& item : items) {
    if (!first) o << ',';
    first = false;
    each(item);
  }
  o << ']';
}

void json_tensor_ref(std::ostream& o, const Recorder& r, const at::Tensor& t) {
  if (!t.defined()) {
    o << "null";
    return;
  }
  if (auto id = find_id(r, t)) {
    o << "{\"t\":" << *id << "}";
    return;
  }
  // A number the formula wrapped into a tensor without the dispatcher (scalar_to_tensor).
  if (t.device().is_cpu() && t.dim() == 0 && !t.requires_grad()) {
    if (t.is_floating_point()) {
      o << "{\"n\":";
      json_double(o, t.item<double>());
      o << "}";
      return;
    }
    if (t.scalar_type() == at::kBool) {
      o << "{\"n\":" << (t.item<bool>() ? "true" : "false") << "}";
      return;
    }
    if (!t.is_complex()) {
      o << "{\"n\":" << t.item<int64_t>() << "}";
      return;
    }
    o << "{\"n\":";
    json_complex(o, t.item<c10::complex<double>>());
    o << "}";
    return;
  }
  std::ostringstream d;
  d << t.scalar_type() << t.sizes() << " on " << t.device().str();
  o << "{\"u\":";
  json_str(o, "a tensor the recording did not see made: " + d.str());
  o << "}";
}

void json_ivalue(std::ostream& o, const Recorder& r, const c10::IValue& v) {
  if (v.isNone()) {
    o << "null";
  } else if (v.isTensor()) {
    json_tensor_ref(o, r, v.toTensor());
  } else if (v.isTensorList()) {
    json_list(o, v.toTensorVector(), [&](const at::Tensor& t) { json_tensor_ref(o, r, t); });
  } else if (v.isIntList()) {
    json_list(o, v.toIntVector(), [&](int64_t i) { o << i; });
  } else if (v.isDoubleList()) {
    json_list(o, v.toDoubleVector(), [&](double d) { json_double(o, d); });
  } else if (v.isBoolList()) {
    json_list(o, v.toBoolList().vec(), [&](bool b) { o << (b ? "true" : "false"); });
  } else if (v.isList()) {
    json_list(o, v.toListRef(), [&](const c10::IValue& e) { json_ivalue(o, r, e); });
  } else if (v.isInt()) {
    o << v.toInt();
  } else if (v.isSymInt()) {
    auto s = v.toSymInt().maybe_as_int();
    if (s) {
      o << *s;
    } else {
      o << "{\"u\":\"a symbolic int\"}";
    }
  } else if (v.isDouble()) {
    json_double(o, v.toDouble());
  } else if (v.isComplexDouble()) {
    json_complex(o, v.toComplexDouble());
  } else if (v.isBool()) {
    o << (v.toBool() ? "true" : "false");
  } else if (v.isString()) {
    o << "{\"s\":";
    json_str(o, v.toStringRef());
    o << "}";
  } else if (v.isDevice()) {
    o << "{\"d\":";
    json_str(o, v.toDevice().str());
    o << "}";
  } else {
    o << "{\"u\":";
    json_str(o, std::string("a ") + v.tagKind() + " argument");
    o << "}";
  }
}

void json_result(std::ostream& o, Recorder& r, const c10::IValue& v);

void json_new_tensor(std::ostream& o, Recorder& r, const at::Tensor& t) {
  if (!t.defined()) {
    o << "null";
    return;
  }
  // An in-place or out= op returns its argument: the same tensor, the same id.
  auto same = r.by_impl.find(t.unsafeGetTensorImpl());
  int64_t id = same != r.by_impl.end() ? same->second : assign_id(r, t);
  o << "{\"t\":" << id << ",\"dtype\":" << static_cast<int>(t.scalar_type()) << ",\"shape\":";
  json_list(o, t.sizes(), [&](int64_t d) { o << d; });
  o << "}";
}

void json_result(std::ostream& o, Recorder& r, const c10::IValue& v) {
  if (v.isTensor()) {
    json_new_tensor(o, r, v.toTensor());
  } else if (v.isTensorList()) {
    json_list(o, v.toTensorVector(), [&](const at::Tensor& t) { json_new_tensor(o, r, t); });
  } else {
    json_ivalue(o, r, v);
  }
}

// ---- ops without a meta kernel, met while recording on meta tensors ----
//
// Meta inference runs such an op on CPU stand-ins of its meta tensors (zeros, then ones, then
// identity matrices) and takes the results' shapes; recording does the same, below autograd,
// so the call's autograd node (recorded above it) is kept. `polar` is one: its composite
// kernel calls `polar.out`, which has CPU and CUDA kernels only.

// Whether `op` runs on meta tensors: a meta kernel of its own, or a composite one.
bool serves_meta(const c10::OperatorHandle& op) {
  return op.hasKernelForDispatchKey(c10::DispatchKey::Meta) ||
         op.hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd) ||
         op.hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutogradNonFunctional) ||
         op.hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd);
}

// Calls `f` on every defined tensor among the top `n` stack values (lists included).
template <typename F>
void each_tensor(const Stack& stack, size_t n, F f) {
  for (size_t i = stack.size() - n; i < stack.size(); ++i) {
    const c10::IValue& v = stack[i];
    if (v.isTensor()) {
      if (v.toTensor().defined()) f(v.toTensor());
    } else if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorVector()) {
        if (t.defined()) f(t);
      }
    } else if (v.isList()) {
      for (const c10::IValue& e : v.toListRef()) {
        if (e.isTensor() && e.toTensor().defined()) f(e.toTensor());
      }
    }
  }
}

// Whether the call must run on CPU stand-ins: the op has no meta kernel, it is given meta
// tensors, and no autograd node is due for it (the call is below autograd, grad mode is off,
// or nothing requires grad), so nothing is lost by running it outside the dispatcher's keys.
bool needs_stand_ins(const c10::OperatorHandle& op, c10::DispatchKeySet ks, const Stack& stack) {
  if (serves_meta(op)) return false;
  const size_t n = op.schema().arguments().size();
  bool meta = false;
  bool requires_grad = false;
  each_tensor(stack, n, [&](const at::Tensor& t) {
    meta = meta || t.is_meta();
    requires_grad = requires_grad || t.requires_grad();
  });
  const bool autograd = !(ks & c10::autograd_dispatch_keyset).empty() &&
                        c10::GradMode::is_enabled() && requires_grad;
  return meta && !autograd;
}

enum class Fill { Zeros, Ones, Eye };

// A CPU tensor laid out as `t`, filled with `fill` (identity matrices in the last two
// dimensions where they are square, else ones).
at::Tensor cpu_stand_in(const at::Tensor& t, Fill fill) {
  at::Tensor c = at::empty_strided(t.sizes(), t.strides(), t.options().device(at::kCPU));
  const auto n = c.dim();
  if (fill == Fill::Zeros) {
    c.zero_();
  } else if (fill == Fill::Eye && n >= 2 && c.size(n - 1) == c.size(n - 2)) {
    c.zero_();
    c.diagonal(0, -2, -1).fill_(1);
  } else {
    c.fill_(1);
  }
  return c;
}

// `v` with its meta tensors replaced by CPU stand-ins (each pair kept in `made`) and a meta
// device by the CPU.
c10::IValue to_cpu(const c10::IValue& v, Fill fill,
                   std::vector<std::pair<at::Tensor, at::Tensor>>& made) {
  auto one = [&](const at::Tensor& t) {
    if (!t.defined() || !t.is_meta()) return t;
    at::Tensor c = cpu_stand_in(t, fill);
    made.emplace_back(t, c);
    return c;
  };
  if (v.isTensor()) return one(v.toTensor());
  if (v.isTensorList()) {
    c10::List<at::Tensor> out;
    for (const at::Tensor& t : v.toTensorVector()) out.push_back(one(t));
    return out;
  }
  if (v.isList() && v.toList().elementType()->kind() == c10::TypeKind::OptionalType) {
    c10::List<std::optional<at::Tensor>> out;
    for (const c10::IValue& e : v.toListRef()) {
      out.push_back(e.isTensor() ? std::optional<at::Tensor>(one(e.toTensor())) : std::nullopt);
    }
    return out;
  }
  if (v.isDevice() && v.toDevice().is_meta()) return c10::IValue(c10::Device(at::kCPU));
  return v;
}

// A result of the CPU call as a meta value: a stand-in given for a meta tensor is that
// tensor (written in place or out=, its metadata as the call left the stand-in's), any other
// tensor a new meta tensor laid out alike.
c10::IValue to_meta(const c10::IValue& v, const std::vector<std::pair<at::Tensor, at::Tensor>>& made) {
  auto one = [&](const at::Tensor& c) {
    if (!c.defined() || c.is_meta()) return c;
    for (const auto& [m, stand_in] : made) {
      if (stand_in.is_same(c)) return m;
    }
    return at::empty_strided(c.sizes(), c.strides(), c.options().device(at::kMeta));
  };
  if (v.isTensor()) return one(v.toTensor());
  if (v.isTensorList()) {
    c10::List<at::Tensor> out;
    for (const at::Tensor& t : v.toTensorVector()) out.push_back(one(t));
    return out;
  }
  return v;
}

std::string shapes_of(const Stack& results) {
  std::ostringstream o;
  for (const c10::IValue& v : results) {
    if (v.isTensor() && v.toTensor().defined()) o << v.toTensor().sizes();
    o << ';';
  }
  return o.str();
}

// Runs the call on CPU stand-ins of its meta tensors and leaves meta results on the stack,
// as meta inference does: zeros, then ones where the kernel rejects zeros, then identity
// matrices; a result shape that differs between zeros and ones depends on the values, which
// meta tensors do not have, and is an error. A written meta tensor gets the size the call
// gave its stand-in. Stand-ins over `limit` bytes in all are refused.
void call_on_cpu_stand_ins(const c10::OperatorHandle& op, Stack* stack, uint64_t limit) {
  const auto& schema = op.schema();
  const size_t nargs = schema.arguments().size();
  uint64_t bytes = 0;
  each_tensor(*stack, nargs, [&](const at::Tensor& t) {
    if (t.is_meta()) bytes += static_cast<uint64_t>(t.numel()) * t.element_size();
  });
  TORCH_CHECK(bytes <= limit, schema.operator_name(),
              " has no meta kernel, and running it on CPU stand-ins of its meta tensors would take ",
              bytes, " bytes (graphbug allows a quarter of the memory available, ", limit, ")");
  const Stack args(stack->end() - nargs, stack->end());
  // Neither recorded nor differentiated: the call's own autograd node, if any, is above.
  c10::impl::ExcludeDispatchKeyGuard no_recording(c10::DispatchKey::TESTING_ONLY_GenericMode);
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  struct Run {
    Stack results;
    std::vector<std::pair<at::Tensor, at::Tensor>> made;
  };
  auto run = [&](Fill fill) -> std::optional<Run> {
    Run r;
    Stack cpu;
    for (const c10::IValue& a : args) cpu.push_back(to_cpu(a, fill, r.made));
    try {
      op.callBoxed(cpu);
    } catch (const std::exception&) {
      return std::nullopt;
    }
    r.results = std::move(cpu);
    return r;
  };
  std::optional<Run> chosen = run(Fill::Zeros);
  if (chosen) {
    if (auto ones = run(Fill::Ones)) {
      TORCH_CHECK(shapes_of(chosen->results) == shapes_of(ones->results), schema.operator_name(),
                  " has no meta kernel, and its output shape depends on the input values (",
                  shapes_of(chosen->results), " on zeros, ", shapes_of(ones->results),
                  " on ones), which meta tensors do not have");
    }
  } else {
    chosen = run(Fill::Ones);
    if (!chosen) chosen = run(Fill::Eye);
  }
  if (!chosen) {
    // libtorch's own words, from a run that shows them.
    Stack cpu;
    std::vector<std::pair<at::Tensor, at::Tensor>> made;
    for (const c10::IValue& a : args) cpu.push_back(to_cpu(a, Fill::Ones, made));
    try {
      op.callBoxed(cpu);
    } catch (const c10::Error& e) {
      TORCH_CHECK(false, schema.operator_name(),
                  " has no meta kernel, and its CPU kernel rejects stand-ins of zeros, ones and "
                  "the identity: ", e.what_without_backtrace());
    }
    TORCH_CHECK(false, schema.operator_name(), " has no meta kernel, and its CPU kernel rejects "
                "stand-ins of zeros, ones and the identity");
  }
  // Written meta tensors take the metadata the call gave their stand-ins.
  for (const auto& [m, c] : chosen->made) {
    if (m.sizes() != c.sizes() || m.strides() != c.strides()) {
      at::Tensor w = m;
      w.resize_(c.sizes());
      w.as_strided_(c.sizes(), c.strides());
    }
  }
  stack->erase(stack->end() - nargs, stack->end());
  for (const c10::IValue& v : chosen->results) stack->push_back(to_meta(v, chosen->made));
}

void record_fallback(const c10::OperatorHandle& op, c10::DispatchKeySet ks,
                     torch::jit::Stack* stack) {
  const auto below = ks & c10::DispatchKeySet(c10::DispatchKeySet::FULL_AFTER,
                                              c10::DispatchKey::TESTING_ONLY_GenericMode);
  Recorder* r = tls_recorder;
  // A CompositeImplicitAutograd kernel serves the autograd keys unless the op has a kernel
  // of its own for the backend (the dispatcher's precedence): then it decomposes.
  const bool decomposes =
      op.hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd) &&
      !op.hasKernelForDispatchKey(c10::DispatchKey::AutogradCPU) &&
      !op.hasKernelForDispatchKey(c10::DispatchKey::CPU) &&
      !op.hasKernelForDispatchKey(c10::DispatchKey::Meta);
  if (r == nullptr || !r->on) {
    op.redispatchBoxed(below, stack);
    return;
  }
  // Runs the call, on CPU stand-ins where meta tensors have no kernel.
  auto run_call = [&] {
    if (needs_stand_ins(op, ks, *stack)) {
      call_on_cpu_stand_ins(op, stack, r->stand_in_limit);
    } else {
      op.redispatchBoxed(below, stack);
    }
  };
  if (r->depth > 0 || decomposes) {
    run_call();
    return;
  }
  const auto& schema = op.schema();
  const auto& formals = schema.arguments();
  const size_t nargs = formals.size();
  std::ostringstream call;
  call << "{\"op\":";
  json_str(call, schema.name());
  call << ",\"overload\":";
  json_str(call, schema.overload_name());
  call << ",\"phase\":" << r->phase << ",\"mutates\":" << (schema.is_mutable() ? "true" : "false")
       << ",\"args\":[";
  for (size_t i = 0; i < nargs; ++i) {
    if (i) call << ',';
    json_ivalue(call, *r, (*stack)[stack->size() - nargs + i]);
  }
  call << "],\"defaults\":[";
  for (size_t i = 0; i < nargs; ++i) {
    if (i) call << ',';
    const auto& d = formals[i].default_value();
    const c10::IValue& v = (*stack)[stack->size() - nargs + i];
    const bool none = v.isNone() || (v.isTensor() && !v.toTensor().defined());
    bool same = d.has_value() &&
                (none ? d->isNone() : !v.isTensor() && !v.isTensorList() && *d == v);
    call << (same ? "true" : "false");
  }
  call << "],\"results\":[";
  r->depth += 1;
  try {
    run_call();
  } catch (...) {
    r->depth -= 1;
    throw;
  }
  r->depth -= 1;
  const size_t nret = schema.returns().size();
  for (size_t i = 0; i < nret; ++i) {
    if (i) call << ',';
    json_result(call, *r, (*stack)[stack->size() - nret + i]);
  }
  call << "]}";
  if (r->any_call) r->calls << ',';
  r->any_call = true;
  r->calls << call.str();
}

// Turns recording on or off on this thread.
void set_recording(Recorder* r, bool on) {
  r->on = on;
  tls_recorder = on ? r : nullptr;
  c10::impl::tls_set_dispatch_key_included(c10::DispatchKey::TESTING_ONLY_GenericMode, on);
}

Recorder& recorder_of(void* r) { return *static_cast<Recorder*>(r); }

}  // namespace

extern "C" {

void gb_free_str(char* s) { std::free(s); }

// The libtorch version the shim was built against, e.g. "2.13.0".
const char* gb_torch_version() { return TORCH_VERSION; }

// ---- ops and schemas ----

char* gb_op_find(const char* name, const char* overload, void** out) {
  return guarded([&] {
    auto op = c10::Dispatcher::singleton().findSchemaOrThrow(name, overload);
    *out = new c10::OperatorHandle(op);
  });
}

void gb_op_free(void* op) { delete static_cast<c10::OperatorHandle*>(op); }

// Whether the op is a composite of other ops (a CompositeImplicitAutograd kernel and no
// kernel of its own for CPU or Meta): `reshape` is, and may copy though its schema says it
// aliases; `view` is not, and never copies.
bool gb_op_is_composite(void* op) {
  const auto& h = *static_cast<c10::OperatorHandle*>(op);
  return h.hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd) &&
         !h.hasKernelForDispatchKey(c10::DispatchKey::CPU) &&
         !h.hasKernelForDispatchKey(c10::DispatchKey::Meta);
}

// Whether the op draws from a random generator (libtorch's `nondeterministic_seeded` tag).
bool gb_op_is_random(void* op) {
  return static_cast<c10::OperatorHandle*>(op)->hasTag(at::Tag::nondeterministic_seeded);
}

char* gb_op_schema_json(void* op, char** out) {
  return guarded([&] {
    const auto& s = static_cast<c10::OperatorHandle*>(op)->schema();
    std::ostringstream o;
    o << "{\"name\":";
    json_str(o, s.name());
    o << ",\"overload\":";
    json_str(o, s.overload_name());
    o << ",\"is_mutable\":" << (s.is_mutable() ? "true" : "false");
    o << ",\"is_vararg\":" << (s.is_vararg() ? "true" : "false");
    o << ",\"text\":";
    std::ostringstream text;
    text << s;
    json_str(o, text.str());
    o << ",\"arguments\":[";
    for (size_t i = 0; i < s.arguments().size(); ++i) {
      if (i) o << ',';
      json_arg(o, s.arguments()[i]);
    }
    o << "],\"returns\":[";
    for (size_t i = 0; i < s.returns().size(); ++i) {
      if (i) o << ',';
      json_arg(o, s.returns()[i]);
    }
    o << "]}";
    *out = dup_str(o.str());
  });
}

// Registers graphbug::fault once per process; another copy of this shim (in a plugin) may
// have registered it already.
char* gb_register_fault_op() {
  return guarded([&] {
    if (c10::Dispatcher::singleton().findSchema({"graphbug::fault", ""}).has_value()) return;
    static torch::Library* lib =
        new torch::Library(torch::Library::FRAGMENT, "graphbug", std::nullopt, __FILE__, __LINE__);
    lib->def("fault(Tensor self, str kind, float amount, str message) -> Tensor");
    lib->impl("fault", torch::dispatch(c10::DispatchKey::CompositeExplicitAutograd,
                                       TORCH_FN(fault_kernel)));
  });
}

// ---- plans ----

void* gb_plan_new(void* op) { return new Plan(*static_cast<c10::OperatorHandle*>(op)); }

void gb_plan_free(void* plan) { delete static_cast<Plan*>(plan); }

void gb_plan_push_none(void* plan) { plan_of(plan).tmpl.emplace_back(); }

void gb_plan_push_int(void* plan, int64_t v) { plan_of(plan).tmpl.emplace_back(v); }

void gb_plan_push_double(void* plan, double v) { plan_of(plan).tmpl.emplace_back(v); }

void gb_plan_push_complex(void* plan, double re, double im) {
  plan_of(plan).tmpl.emplace_back(c10::complex<double>(re, im));
}

void gb_plan_push_bool(void* plan, uint8_t v) { plan_of(plan).tmpl.emplace_back(v != 0); }

void gb_plan_push_str(void* plan, const char* v) {
  plan_of(plan).tmpl.emplace_back(std::string(v));
}

void gb_plan_push_int_list(void* plan, const int64_t* v, size_t n) {
  plan_of(plan).tmpl.emplace_back(std::vector<int64_t>(v, v + n));
}

void gb_plan_push_double_list(void* plan, const double* v, size_t n) {
  plan_of(plan).tmpl.emplace_back(std::vector<double>(v, v + n));
}

void gb_plan_push_bool_list(void* plan, const uint8_t* v, size_t n) {
  c10::List<bool> list;
  list.reserve(n);
  for (size_t i = 0; i < n; ++i) list.push_back(v[i] != 0);
  plan_of(plan).tmpl.emplace_back(std::move(list));
}

// A Python number given for a Tensor argument: a 0-dim "wrapped number" tensor, which type
// promotion treats as a scalar, as PyTorch's argument parser makes it. kind: 0 int,
// 1 float, 2 bool.
char* gb_plan_push_scalar_tensor(void* plan, uint8_t kind, int64_t i, double d) {
  return guarded([&] {
    c10::Scalar s = kind == 0 ? c10::Scalar(i) : kind == 1 ? c10::Scalar(d) : c10::Scalar(i != 0);
    at::Tensor t = at::scalar_to_tensor(s);
    t.unsafeGetTensorImpl()->set_wrapped_number(true);
    plan_of(plan).tmpl.emplace_back(std::move(t));
  });
}

char* gb_plan_push_device(void* plan, const char* device) {
  return guarded([&] { plan_of(plan).tmpl.emplace_back(c10::Device(std::string(device))); });
}

char* gb_plan_push_default(void* plan, size_t arg_index) {
  return guarded([&] {
    Plan& p = plan_of(plan);
    const auto& args = p.op.schema().arguments();
    TORCH_CHECK(arg_index < args.size(), "argument index ", arg_index, " out of range");
    const auto& d = args[arg_index].default_value();
    TORCH_CHECK(d.has_value(), "argument `", args[arg_index].name(), "` has no default");
    p.tmpl.push_back(*d);
  });
}

void gb_plan_push_tensor_hole(void* plan) {
  Plan& p = plan_of(plan);
  p.holes.push_back(Hole{p.tmpl.size(), Hole::kTensor, {}});
  p.tmpl.emplace_back();
  p.n_tensors += 1;
}

// A Tensor[] (all present) or Tensor?[] (present[i] == 0 means None) argument.
void gb_plan_push_list_hole(void* plan, const uint8_t* present, size_t n, uint8_t optional) {
  Plan& p = plan_of(plan);
  Hole h{p.tmpl.size(), optional ? Hole::kOptTensorList : Hole::kTensorList,
         std::vector<uint8_t>(present, present + n)};
  for (uint8_t b : h.present) p.n_tensors += b ? 1 : 0;
  p.holes.push_back(std::move(h));
  p.tmpl.emplace_back();
}

size_t gb_plan_num_tensors(void* plan) { return plan_of(plan).n_tensors; }

// Fills the plan's holes from `tensors` (in hole order), calls the op, and leaves its
// results on `stack`.
char* gb_plan_call(void* plan, const at::Tensor* const* tensors, size_t n, void* stack,
                   uint8_t with_autograd) {
  return guarded([&] {
    Plan& p = plan_of(plan);
    TORCH_CHECK(n == p.n_tensors, "plan expects ", p.n_tensors, " tensors, got ", n);
    Stack& st = stack_of(stack);
    st.assign(p.tmpl.begin(), p.tmpl.end());
    size_t k = 0;
    for (const Hole& h : p.holes) {
      switch (h.kind) {
        case Hole::kTensor:
          st[h.pos] = c10::IValue(*tensors[k++]);
          break;
        case Hole::kTensorList: {
          c10::List<at::Tensor> list;
          list.reserve(h.present.size());
          for (size_t i = 0; i < h.present.size(); ++i) list.push_back(*tensors[k++]);
          st[h.pos] = c10::IValue(std::move(list));
          break;
        }
        case Hole::kOptTensorList: {
          c10::List<std::optional<at::Tensor>> list;
          list.reserve(h.present.size());
          for (uint8_t b : h.present) {
            if (b) {
              list.push_back(*tensors[k++]);
            } else {
              list.push_back(std::nullopt);
            }
          }
          st[h.pos] = c10::IValue(std::move(list));
          break;
        }
      }
    }
    // graphbug differentiates graphs itself, so libtorch's autograd and view/in-place
    // tracking layers are skipped (the same kernels run, with less bookkeeping per op),
    // unless a caller records libtorch's autograd graph on purpose.
    if (with_autograd) {
      p.op.callBoxed(st);
    } else {
      at::AutoDispatchBelowADInplaceOrView below_autograd;
      p.op.callBoxed(st);
    }
  });
}

// ---- stacks (results) ----

void* gb_stack_new() { return new Stack(); }

void gb_stack_free(void* stack) { delete static_cast<Stack*>(stack); }

size_t gb_stack_len(void* stack) { return stack_of(stack).size(); }

// The value at `i`, or nullptr when out of range. The accessors below never throw: a wrong
// index or kind gives a neutral value, and the Rust side checks kinds first.
static const c10::IValue* value_at(void* stack, size_t i) {
  const Stack& st = stack_of(stack);
  return i < st.size() ? &st[i] : nullptr;
}

// 0 None, 1 defined Tensor, 2 Tensor list, 3 int, 4 double, 5 bool, 6 undefined Tensor,
// 7 anything else, -1 out of range.
int32_t gb_stack_kind(void* stack, size_t i) {
  const c10::IValue* v = value_at(stack, i);
  if (v == nullptr) return -1;
  if (v->isNone()) return 0;
  if (v->isTensor()) return v->toTensor().defined() ? 1 : 6;
  if (v->isTensorList()) return 2;
  if (v->isInt()) return 3;
  if (v->isDouble()) return 4;
  if (v->isBool()) return 5;
  return 7;
}

// A new handle to the tensor at `i` (the caller owns it); nullptr if it is not a tensor.
at::Tensor* gb_stack_tensor(void* stack, size_t i) {
  const c10::IValue* v = value_at(stack, i);
  return v != nullptr && v->isTensor() ? new at::Tensor(v->toTensor()) : nullptr;
}

size_t gb_stack_list_len(void* stack, size_t i) {
  const c10::IValue* v = value_at(stack, i);
  return v != nullptr && v->isTensorList() ? v->toTensorList().size() : 0;
}

// A new handle to element `j` of the tensor list at `i`; nullptr if there is none.
at::Tensor* gb_stack_list_tensor(void* stack, size_t i, size_t j) {
  const c10::IValue* v = value_at(stack, i);
  if (v == nullptr || !v->isTensorList()) return nullptr;
  auto list = v->toTensorList();
  return j < list.size() ? new at::Tensor(list.get(j)) : nullptr;
}

int64_t gb_stack_int(void* stack, size_t i) {
  const c10::IValue* v = value_at(stack, i);
  return v != nullptr && v->isInt() ? v->toInt() : 0;
}

double gb_stack_double(void* stack, size_t i) {
  const c10::IValue* v = value_at(stack, i);
  return v != nullptr && v->isDouble() ? v->toDouble() : 0.0;
}

uint8_t gb_stack_bool(void* stack, size_t i) {
  const c10::IValue* v = value_at(stack, i);
  return v != nullptr && v->isBool() && v->toBool() ? 1 : 0;
}

// The IValue kind at `i`, for messages.
char* gb_stack_describe(void* stack, size_t i) {
  const c10::IValue* v = value_at(stack, i);
  return dup_str(v != nullptr ? v->tagKind() : std::string("out of range"));
}

// ---- tensors ----

// The address of `t`'s storage (0 when it has none): equal for tensors that alias.
size_t gb_tensor_storage_ptr(const at::Tensor* t) {
  if (!t->defined() || !t->has_storage()) return 0;
  return reinterpret_cast<size_t>(t->storage().unsafeGetStorageImpl());
}

// The bytes of a tensor's storage (0 for none).
size_t gb_tensor_storage_nbytes(const at::Tensor* t) {
  if (!t->defined() || !t->has_storage()) return 0;
  return t->storage().nbytes();
}

// A zero-filled contiguous tensor with `t`'s sizes and dtype on `device`.
char* gb_tensor_zeros_like(const at::Tensor* t, const char* device, at::Tensor** out) {
  return guarded([&] {
    *out = new at::Tensor(at::zeros(t->sizes(), t->options().device(c10::Device(std::string(device)))));
  });
}

// `t` moved to `device` (for a meta target: a meta tensor with the same sizes and strides).
char* gb_tensor_to(const at::Tensor* t, const char* device, at::Tensor** out) {
  return guarded([&] { *out = new at::Tensor(t->to(c10::Device(std::string(device)))); });
}

// The state of libtorch's default CPU generator, and the state put back: a run between the
// two draws no number that a later run would otherwise have drawn.
char* gb_cpu_rng_state(at::Tensor** out) {
  return guarded([&] {
    auto gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    *out = new at::Tensor(gen.get_state());
  });
}

char* gb_cpu_rng_set_state(const at::Tensor* state) {
  return guarded([&] {
    auto gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(*state);
  });
}

// The device of a tensor as torch spells it ("cpu", "cuda:0", "meta"); tch cannot tell meta.
char* gb_tensor_device(const at::Tensor* t) { return dup_str(t->device().str()); }

// The c10::ScalarType code of `t`; tch has no Kind for uint16, uint32 and uint64.
int32_t gb_tensor_scalar_type(const at::Tensor* t) {
  return static_cast<int32_t>(t->scalar_type());
}

// `t`'s values converted to the dtype with c10::ScalarType code `code`.
char* gb_tensor_to_dtype(const at::Tensor* t, int64_t code, at::Tensor** out) {
  return guarded([&] { *out = new at::Tensor(t->to(static_cast<c10::ScalarType>(code))); });
}

// `t`'s bits viewed as the dtype with code `code` (`Tensor.view(dtype)`).
char* gb_tensor_view_dtype(const at::Tensor* t, int64_t code, at::Tensor** out) {
  return guarded([&] { *out = new at::Tensor(t->view(static_cast<c10::ScalarType>(code))); });
}


// The overload names of every registered op named `qualified` ("aten::add"), as a JSON
// list ("" for the unnamed overload).
char* gb_op_overloads(const char* qualified, char** out) {
  return guarded([&] {
    std::vector<std::string> names;
    for (const auto& op : c10::Dispatcher::singleton().getAllOpNames()) {
      if (op.name == qualified) names.push_back(op.overload_name);
    }
    std::sort(names.begin(), names.end());
    std::ostringstream o;
    json_list(o, names, [&](const std::string& n) { json_str(o, n); });
    *out = dup_str(o.str());
  });
}

// Every registered op carrying tag `tag` (`nondeterministic_seeded`, `pointwise`), as a
// JSON list of "namespace::name" (overload packets, sorted, each once).
char* gb_ops_with_tag(const char* tag, char** out) {
  return guarded([&] {
    static const std::map<std::string, at::Tag> known = {
        {"nondeterministic_seeded", at::Tag::nondeterministic_seeded},
        {"pointwise", at::Tag::pointwise},
    };
    auto it = known.find(tag);
    TORCH_CHECK(it != known.end(), "unknown op tag `", tag, "`");
    std::set<std::string> names;
    auto& dispatcher = c10::Dispatcher::singleton();
    for (const auto& op : dispatcher.getAllOpNames()) {
      auto handle = dispatcher.findOp(op);
      if (handle && handle->hasTag(it->second)) names.insert(op.name);
    }
    std::vector<std::string> sorted(names.begin(), names.end());
    std::ostringstream o;
    json_list(o, sorted, [&](const std::string& n) { json_str(o, n); });
    *out = dup_str(o.str());
  });
}

// Every op registered with the dispatcher, as `[qualified name, overload]` pairs.
char* gb_all_ops(char** out) {
  return guarded([&] {
    std::ostringstream o;
    json_list(o, c10::Dispatcher::singleton().getAllOpNames(), [&](const c10::OperatorName& op) {
      o << '[';
      json_str(o, op.name);
      o << ',';
      json_str(o, op.overload_name);
      o << ']';
    });
    *out = dup_str(o.str());
  });
}

// ---- recording libtorch's autograd ----

// A new recorder; the first call registers the recording fallback for the mode key.
char* gb_recorder_new(void** out) {
  return guarded([&] {
    static bool registered = [] {
      static torch::Library* lib = new torch::Library(
          torch::Library::IMPL, "_", c10::DispatchKey::TESTING_ONLY_GenericMode, __FILE__,
          __LINE__);
      lib->fallback(torch::CppFunction::makeFromBoxedFunction<&record_fallback>());
      return true;
    }();
    (void)registered;
    *out = new Recorder();
  });
}

// The most bytes the CPU stand-ins of one call's meta tensors may take.
void gb_recorder_set_stand_in_limit(void* r, uint64_t bytes) {
  recorder_of(r).stand_in_limit = bytes;
}

void gb_recorder_free(void* r) {
  if (tls_recorder == r) set_recording(static_cast<Recorder*>(r), false);
  delete static_cast<Recorder*>(r);
}

// Starts (on != 0) or stops recording on this thread; calls made while on carry `phase`.
void gb_recorder_set(void* r, uint8_t on, int32_t phase) {
  Recorder& rec = recorder_of(r);
  rec.phase = phase;
  set_recording(&rec, on != 0);
}

// Names a tensor (an input, an output, a gradient): a tensor already recorded keeps its id.
char* gb_recorder_label(void* r, const at::Tensor* t, const char* label) {
  return guarded([&] {
    Recorder& rec = recorder_of(r);
    TORCH_CHECK(t->defined(), "cannot label an undefined tensor `", label, "`");
    auto id = find_id(rec, *t);
    rec.labels.emplace_back(label, id ? *id : assign_id(rec, *t));
  });
}

// Back-propagates `grads` from `outputs` to `inputs` with libtorch's engine while recording
// (phase 1); the gradients' ids (or -1 where an input gets none) go into the recording.
char* gb_recorder_grad(void* r, const at::Tensor* const* outputs, const at::Tensor* const* grads,
                       size_t n_out, const at::Tensor* const* inputs, size_t n_in) {
  return guarded([&] {
    Recorder& rec = recorder_of(r);
    torch::autograd::variable_list outs, gs, ins;
    for (size_t i = 0; i < n_out; ++i) {
      outs.push_back(*outputs[i]);
      gs.push_back(*grads[i]);
    }
    for (size_t i = 0; i < n_in; ++i) ins.push_back(*inputs[i]);
    set_recording(&rec, true);
    rec.phase = 1;
    torch::autograd::variable_list result;
    try {
      result = torch::autograd::grad(outs, ins, gs, /*retain_graph=*/false,
                                     /*create_graph=*/false, /*allow_unused=*/true);
    } catch (...) {
      set_recording(&rec, false);
      throw;
    }
    set_recording(&rec, false);
    for (const at::Tensor& g : result) {
      if (!g.defined()) {
        rec.results.push_back(-1);
        continue;
      }
      auto id = find_id(rec, g);
      rec.results.push_back(id ? *id : -2);
    }
  });
}

// The recording as JSON: {"calls": [...], "labels": [[label, id]...], "results": [id...]}.
char* gb_recorder_json(void* r, char** out) {
  return guarded([&] {
    Recorder& rec = recorder_of(r);
    std::ostringstream o;
    o << "{\"calls\":[" << rec.calls.str() << "],\"labels\":";
    json_list(o, rec.labels, [&](const std::pair<std::string, int64_t>& l) {
      o << '[';
      json_str(o, l.first);
      o << ',' << l.second << ']';
    });
    o << ",\"results\":";
    json_list(o, rec.results, [&](int64_t id) { o << id; });
    o << "}";
    *out = dup_str(o.str());
  });
}

}  // extern "C"
