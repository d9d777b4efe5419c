// align-check's TorchScript shim: the one place that touches libtorch's JIT graph API.
//
// tch exposes TorchScript modules but not their graphs, so this file loads a module, inlines
// its `forward`, and builds a second graph function that computes the same outputs with an
// `align_check::observe` node after every tensor value (inside loop bodies and if branches
// too). Each observe node hands its tensor to a sink the Rust side passes in for the run,
// which copies it out at once: nothing
// is kept alive by the graph, so memory stays at the plain forward's working set plus what the
// sink decides to keep, and a later in-place op (relu_) cannot rewrite a value already taken.
// Static facts about each captured value (op, module hierarchy, source line, producers) are
// handed to Rust as one JSON string; tensors cross as heap-allocated at::Tensor pointers,
// the representation tch uses, so Rust wraps them with tch::Tensor::from_ptr.
//
// No C++ exception may cross into Rust: every entry point catches everything and returns
// the message through `err` (a malloc'ed string the caller frees with ac_free_string).

#include <torch/script.h>
#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/passes/inliner.h>
#include <torch/csrc/jit/runtime/graph_executor.h>
#include <torch/library.h>

#include <algorithm>
#include <map>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ac_args.h"

using torch::jit::Node;
using torch::jit::Value;

// shadow.cpp: the standard-op decomposition inserted before each fused layer op; maps the
// fused op's output to the shadow value captured in its place.
std::unordered_map<const Value*, const Value*> insert_shadows(torch::jit::Graph& graph);

// The sink of the run in progress on this thread. The interpreter runs every node of the
// graph on the calling thread, so a thread-local is enough to route observe nodes to it.
using Sink = void (*)(void* ctx, size_t id, void* tensor);
namespace {
thread_local Sink current_sink = nullptr;
thread_local void* current_ctx = nullptr;

// An undefined tensor (an optional result the op did not compute: the attention weights of
// nn.MultiheadAttention's fused fast path) reaches the sink as a null pointer, so that the
// Rust side accounts for the value instead of asking libtorch about a tensor that is not there.
void observe(const at::Tensor& value, int64_t id) {
  if (current_sink != nullptr) {
    current_sink(current_ctx, static_cast<size_t>(id),
                 value.defined() ? new at::Tensor(value) : nullptr);
  }
}
}  // namespace

// CONSERVATIVE alias analysis marks the op as having side effects, so dead-code elimination
// in the executor's required passes keeps nodes whose result nobody uses.
// Registered on first load (ac_load), not by a static initialiser (TORCH_LIBRARY): a binary
// that links this file without loading TorchScript then references nothing of libtorch.
void register_ops() {
  static torch::Library lib(torch::Library::DEF, "align_check", std::nullopt, __FILE__, __LINE__);
  static const bool defined = (lib.def(torch::schema("observe(Tensor value, int id) -> ()",
                                                     c10::AliasAnalysisKind::CONSERVATIVE),
                                       &observe),
                               true);
  (void)defined;
}

namespace {

char* dup_string(const std::string& s) {
  char* out = static_cast<char*>(std::malloc(s.size() + 1));
  if (out != nullptr) {
    std::memcpy(out, s.c_str(), s.size() + 1);
  }
  return out;
}

void set_error(char** err, const std::string& message) {
  if (err != nullptr) {
    *err = dup_string(message);
  }
}

// libtorch error messages carry a multi-line C++ backtrace after the first lines; the user
// needs the message, not our stack.
std::string short_message(const char* what) {
  std::string msg(what == nullptr ? "unknown error" : what);
  auto pos = msg.find("\nException raised from");
  if (pos != std::string::npos) msg = msg.substr(0, pos);
  pos = msg.find("\nframe #");
  if (pos != std::string::npos) msg = msg.substr(0, pos);
  return msg;
}

void json_escape(std::ostringstream& out, const std::string& s) {
  out << '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': out << "\\\""; break;
      case '\\': out << "\\\\"; break;
      case '\n': out << "\\n"; break;
      case '\r': out << "\\r"; break;
      case '\t': out << "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out << buf;
        } else {
          out << c;
        }
    }
  }
  out << '"';
}

bool is_tensor(const Value* v) {
  return v->type()->kind() == c10::TypeKind::TensorType;
}

bool inside_torch_package(const std::string& location) {
  return location.find("/torch/") != std::string::npos ||
         location.find("code/__torch__") != std::string::npos;
}

// The innermost frame outside the torch package of a traced op's recorded Python stack. The
// tracer keeps the whole stack as the text of the op's source, one `file(line): function`
// per line, innermost first; the range's own file and line are only the innermost frame,
// which for a module's op is inside torch (every BatchNorm at functional.py). "" when the
// text is not such a stack or every frame is PyTorch's.
std::string innermost_user_frame(const std::string& text) {
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    auto close = line.rfind("): ");
    auto open = close == std::string::npos ? std::string::npos : line.rfind('(', close);
    if (open == std::string::npos || open == 0) return "";
    std::string number = line.substr(open + 1, close - open - 1);
    if (number.empty() || number.find_first_not_of("0123456789") != std::string::npos) return "";
    std::string file = line.substr(0, open);
    if (!inside_torch_package(file)) return file + ":" + number;
  }
  return "";
}

// "file:line" of a range, following a loaded module's serialized code back to the Python
// source that generated it where the archive kept that record.
std::string describe_range(const torch::jit::SourceRange& range) {
  auto original = range.findSourceRangeThatGenerated();
  const torch::jit::SourceRange& r = original ? *original : range;
  auto flc = r.file_line_col();
  if (!flc || std::get<0>(*flc).empty()) return "";
  std::string location = std::get<0>(*flc) + ":" + std::to_string(std::get<1>(*flc));
  if (inside_torch_package(location) && r.source()) {
    std::string user = innermost_user_frame(std::string(r.source()->text_str().str()));
    if (!user.empty()) return user;
  }
  return location;
}

// The user's own line for a node: the innermost frame outside the torch package. A conv's
// own range points into torch/nn/modules/conv.py; the call site `self.conv1(x)` in the
// user's model is one of the inlined call-stack entries (outermost first).
std::string source_of(Node* node) {
  std::vector<std::string> frames;
  if (auto cs = node->callstack()) {
    for (const auto& entry : (*cs)->vec()) frames.push_back(describe_range(std::get<1>(entry)));
  }
  frames.push_back(describe_range(node->sourceRange()));
  for (auto it = frames.rbegin(); it != frames.rend(); ++it) {
    if (!it->empty() && !inside_torch_package(*it)) return *it;
  }
  for (auto it = frames.rbegin(); it != frames.rend(); ++it) {
    if (!it->empty()) return *it;
  }
  return "";
}

// Every frame of the Python stack that produced a node, outermost first, as "file:line". A
// traced op's source text is its whole recorded stack (innermost first, see
// innermost_user_frame); a scripted op has its call-stack frames and its own range.
std::vector<std::string> stack_of(Node* node) {
  std::vector<std::string> frames;
  const torch::jit::SourceRange& own = node->sourceRange();
  auto original = own.findSourceRangeThatGenerated();
  const torch::jit::SourceRange& r = original ? *original : own;
  if (r.source()) {
    std::istringstream lines(std::string(r.source()->text_str().str()));
    std::string line;
    while (std::getline(lines, line)) {
      auto close = line.rfind("): ");
      auto open = close == std::string::npos ? std::string::npos : line.rfind('(', close);
      if (open == std::string::npos || open == 0) {
        frames.clear();
        break;
      }
      std::string number = line.substr(open + 1, close - open - 1);
      if (number.empty() || number.find_first_not_of("0123456789") != std::string::npos) {
        frames.clear();
        break;
      }
      frames.push_back(line.substr(0, open) + ":" + number);
    }
    if (!frames.empty()) return {frames.rbegin(), frames.rend()};
  }
  if (auto cs = node->callstack()) {
    for (const auto& entry : (*cs)->vec()) {
      std::string frame = describe_range(std::get<1>(entry));
      if (!frame.empty()) frames.push_back(frame);
    }
  }
  std::string last = describe_range(own);
  if (!last.empty()) frames.push_back(last);
  return frames;
}

bool has_calls(torch::jit::Block* block) {
  for (Node* n : block->nodes()) {
    if (n->kind() == c10::prim::CallMethod || n->kind() == c10::prim::CallFunction) return true;
    for (auto* b : n->blocks()) {
      if (has_calls(b)) return true;
    }
  }
  return false;
}

// Inline takes each callee's "optimized graph", which is itself inlined (with the module
// call stack that getNodesModuleHierarchy reads) only while the graph executor's
// optimisations are on. They are switched on for inlining and off again for running, so
// the captured run executes the graph as saved, like the plain forward.
void inline_everything(torch::jit::Graph& graph) {
  torch::jit::setGraphExecutorOptimize(true);
  for (int depth = 0; depth < 64 && has_calls(graph.block()); ++depth) {
    torch::jit::Inline(graph);
  }
  torch::jit::setGraphExecutorOptimize(false);
}

// Nodes whose tensor outputs are not activations: parameters and buffers read from the
// module (prim::GetAttr), constants, calls that could not be inlined, and the placeholder a
// scripted branch that raises yields for its outputs (prim::Uninitialized: typed a Tensor,
// it holds none, so observing it fails the run although the branch is never taken).
bool is_structural(const Node* node) {
  auto k = node->kind();
  return k == c10::prim::Constant || k == c10::prim::GetAttr || k == c10::prim::CallMethod ||
         k == c10::prim::CallFunction || k == c10::prim::Uninitialized;
}

// Every attribute slot of every module that is neither a submodule nor a parameter (buffers,
// numbers, lists: what forward may change), deep-copied, so that each run starts from the
// loaded state.
struct StateSnapshot {
  std::vector<std::tuple<c10::intrusive_ptr<c10::ivalue::Object>, size_t, c10::IValue>> slots;

  void take(const torch::jit::Module& root) {
    for (const auto& m : root.modules()) {
      auto object = m._ivalue();
      const auto& type = m.type();
      for (size_t i = 0; i < type->numAttributes(); ++i) {
        if (type->is_parameter(i) || type->getAttribute(i)->kind() == c10::TypeKind::ClassType) {
          continue;
        }
        slots.emplace_back(object, i, object->getSlot(i).deepcopy());
      }
    }
  }

  void restore() const {
    for (const auto& [object, i, value] : slots) object->setSlot(i, value.deepcopy());
  }
};

// Everything the Rust side needs, built once per loaded module.
struct Plan {
  torch::jit::Module module;
  // Taken only when forward writes module state (see collect_state_writes).
  std::unique_ptr<StateSnapshot> state;
  std::unique_ptr<torch::jit::GraphFunction> capture_fn;
  // forward's arguments after `self`, as its schema declares them (types, defaults).
  std::vector<c10::Argument> arguments;
  std::string meta_json;
  size_t n_user_inputs = 0;
  size_t n_graph_outputs = 0;
};

// A loop body's carried parameter holds the loop's initial value in the first iteration and
// the body's own result of the iteration before in the others. Both are its producers (the
// Rust side keeps, per firing, the latest firing of each, and a result not yet computed has
// none), so that what the body computes is seen to come from the model's inputs, not taken
// for a constant, and each iteration reads the one before.
using Carried = std::unordered_map<const Value*, std::vector<const Value*>>;

void collect_carried(torch::jit::Block* block, Carried& carried) {
  for (Node* node : block->nodes()) {
    if (node->kind() == c10::prim::Loop) {
      // Loop inputs: trip count, condition, carried values; body inputs: iteration, carried
      // values; body outputs: condition, carried values.
      torch::jit::Block* body = node->blocks()[0];
      for (size_t k = 1; k < body->inputs().size(); ++k) {
        std::vector<const Value*> sources;
        if (k + 1 < node->inputs().size()) sources.push_back(node->input(k + 1));
        if (k < body->outputs().size() && body->outputs()[k] != body->inputs()[k]) {
          sources.push_back(body->outputs()[k]);
        }
        carried[body->inputs()[k]] = sources;
      }
    }
    for (auto* b : node->blocks()) collect_carried(b, carried);
  }
}

// In-place writes carry dataflow. `canvas = torch.zeros(...); canvas[:, idx] = feats` traces
// as aten::zeros, a view of it (aten::slice) and aten::index_put_ on the view; later readers
// name `canvas`, the value aten::zeros made, although what they read depends on `feats`.
// Every write through a view reaches the view's base, so a reader of a value depends on the
// writes to that value's base made after the value was produced and before the reader: a
// chain of in-place ops (conv, relu_, add_) reads each write's own result and gains nothing.
struct InPlaceWrites {
  // Each node's place in graph order (blocks in place, depth first).
  std::unordered_map<const Node*, size_t> position;
  // A module attribute read twice is two GetAttr values of one tensor.
  std::map<std::pair<const Value*, std::string>, const Value*> attributes;
  // Per base: the writes to it, as (position, the in-place op's result), in graph order.
  std::unordered_map<const Value*, std::vector<std::pair<size_t, const Value*>>> writes;

  static bool is_view(const std::string& kind) {
    static const std::unordered_set<std::string> views = {
        "aten::slice", "aten::select", "aten::view", "aten::reshape", "aten::narrow",
        "aten::unsqueeze", "aten::squeeze", "aten::permute", "aten::transpose", "aten::t",
        "aten::expand", "aten::expand_as", "aten::view_as", "aten::reshape_as",
        "aten::as_strided", "aten::diagonal", "aten::unflatten", "aten::flatten",
        "aten::detach", "aten::alias", "aten::unfold", "aten::movedim", "aten::swapaxes",
        "aten::contiguous", "aten::numpy_T", "aten::mT", "aten::real", "aten::imag"};
    return views.count(kind) != 0;
  }

  // A view made only to be written through (`out[..., :4] = boxes` slices `out` for
  // aten::copy_): what it holds is the buffer before the write (zeros, or whatever
  // torch.empty left), which no ONNX value computes, since ONNX writes functionally. It is
  // not captured; the write's result is.
  static bool is_write_handle(const Value* v, int depth = 0) {
    if (depth > 8 || v->uses().empty() || !is_view(v->node()->kind().toQualString())) {
      return false;
    }
    for (const auto& use : v->uses()) {
      const Node* user = use.user;
      const bool written = use.offset == 0 && is_in_place(user);
      const bool viewed_for_writing = use.offset == 0 && user->outputs().size() == 1 &&
                                      is_write_handle(user->output(0), depth + 1);
      if (!written && !viewed_for_writing) return false;
    }
    return true;
  }

  static bool is_in_place(const Node* node) {
    const std::string kind = node->kind().toQualString();
    return kind.size() > 7 && kind.back() == '_' && kind.rfind("aten::", 0) == 0 &&
           kind.find("__") == std::string::npos && !node->inputs().empty() &&
           is_tensor(node->input(0));
  }

  // The tensor whose memory `v` is (a view's or an in-place result's base), looked up
  // through views, in-place results and repeated attribute reads.
  const Value* base(const Value* v) {
    for (int depth = 0; depth < 64; ++depth) {
      const Node* n = v->node();
      if (n->kind() == c10::prim::GetAttr) {
        auto key = std::make_pair(base(n->input(0)), n->s(c10::attr::name));
        auto it = attributes.emplace(key, v).first;
        return it->second;
      }
      if (n->inputs().empty() || !is_tensor(n->input(0))) return v;
      if (!is_view(n->kind().toQualString()) && !is_in_place(n)) return v;
      v = n->input(0);
    }
    return v;
  }

  void collect(torch::jit::Block* block) {
    for (Node* node : block->nodes()) {
      const size_t next = position.size();
      position[node] = next;
      for (auto* b : node->blocks()) collect(b);
      if (is_in_place(node) && node->outputs().size() == 1) {
        writes[base(node->input(0))].emplace_back(position[node], node->output(0));
      }
    }
  }

  // The results of the writes to `v`'s base after `v` was produced and before `reader`.
  std::vector<const Value*> after(const Value* v, const Node* reader) {
    std::vector<const Value*> out;
    if (reader == nullptr || writes.empty()) return out;
    auto found = writes.find(base(v));
    if (found == writes.end()) return out;
    auto at = [&](const Node* n) {
      auto it = position.find(n);
      return it == position.end() ? size_t{0} : it->second;
    };
    const size_t produced = v->node()->kind() == c10::prim::Param ? 0 : at(v->node());
    const size_t read = at(reader);
    for (const auto& [pos, result] : found->second) {
      if (pos > produced && pos < read && result != v) out.push_back(result);
    }
    return out;
  }
};

// What a value's producers are looked up through: loop-carried parameters and in-place
// writes.
struct Dataflow {
  Carried carried;
  mutable InPlaceWrites writes;
  // A fused op's output -> the last value of its shadow decomposition (shadow.cpp), which is
  // captured in its place.
  std::unordered_map<const Value*, const Value*> shadowed;
};

// The value packed into a tuple or list in the graph that unpacked value `v` is, or null.
const Value* packed_element(const Value* v) {
  const Node* n = v->node();
  if (n->kind() != c10::prim::TupleUnpack && n->kind() != c10::prim::ListUnpack) return nullptr;
  const Node* pack = n->input(0)->node();
  if ((pack->kind() != c10::prim::TupleConstruct && pack->kind() != c10::prim::ListConstruct) ||
      pack->inputs().size() != n->outputs().size()) {
    return nullptr;
  }
  return pack->input(v->offset());
}

// Ids of captured tensors that `v` was computed from, looking through non-tensor glue such
// as prim::ListConstruct (the list argument of aten::cat) and loop-carried parameters, and
// the in-place writes into it that `reader` sees (InPlaceWrites).
void collect_producers(const Value* v,
                       const std::unordered_map<const Value*, size_t>& ids,
                       const Dataflow& flow, std::vector<size_t>& out, int depth,
                       const Node* reader) {
  auto push = [&](size_t id) {
    if (std::find(out.begin(), out.end(), id) == out.end()) out.push_back(id);
  };
  // What was written into `v` in place before the reader read it (see InPlaceWrites).
  for (const Value* written : flow.writes.after(v, reader)) {
    auto w = ids.find(written);
    if (w != ids.end()) push(w->second);
  }
  auto it = ids.find(v);
  if (it != ids.end()) {
    push(it->second);
    return;
  }
  if (depth > 4) return;
  auto alias = flow.carried.find(v);
  if (alias != flow.carried.end()) {
    for (const Value* source : alias->second) {
      collect_producers(source, ids, flow, out, depth + 1, reader);
    }
    return;
  }
  const Node* n = v->node();
  if (n->kind() == c10::prim::Param || n->kind() == c10::prim::Constant) return;
  // Reading a tensor's dtype, device, rank or sizes is not a data dependency: an `arange`
  // sized and typed after the input computes the same values whatever the input holds.
  static const std::unordered_set<std::string> metadata_reads = {
      "prim::dtype", "prim::device", "prim::layout", "aten::dim", "aten::size", "aten::numel",
      "prim::shape", "aten::len"};
  if (metadata_reads.count(n->kind().toQualString()) != 0) return;
  for (const Value* in : n->inputs()) collect_producers(in, ids, flow, out, depth + 1, reader);
}

// Qualified module path of each module type that exactly one module of the archive has.
// Tracing gives every submodule a type of its own, so a call frame's type names the module
// even where the frame's instance name does not (a container iterated, not called, drops
// its level from the names; two sibling branches of the same shape repeat the same names).
using TypePaths = std::unordered_map<const c10::ClassType*, std::string>;

TypePaths unique_type_paths(const torch::jit::Module& root) {
  TypePaths paths;
  std::unordered_map<const c10::ClassType*, int> seen;
  for (const auto& named : root.named_modules()) {
    const c10::ClassType* type = named.value.type().get();
    if (++seen[type] == 1) paths[type] = named.name;
    else paths.erase(type);
  }
  return paths;
}

// For each frame of the node's inlined call stack (the frames getNodesModuleHierarchy
// writes, in the same order), the path its module type resolves to, or "" where the type
// is shared or the instance was not reached through an attribute (a module passed in as an
// argument is called under its own type, which need not be the caller's attribute's).
void write_type_paths(std::ostringstream& meta, const Node* node, const TypePaths& paths) {
  meta << '[';
  if (auto cs = node->callstack()) {
    bool first = true;
    for (const auto& entry : (*cs)->vec()) {
      if (!first) meta << ',';
      first = false;
      const auto& info = std::get<torch::jit::kModuleInstanceInfo>(entry);
      std::string path;
      if (info.has_value() && info->class_type() &&
          info->instance_name() != "INSTANCE_NAME_UNKNOWN") {
        auto it = paths.find(info->class_type().get());
        if (it != paths.end()) path = it->second;
      }
      json_escape(meta, path);
    }
  }
  meta << ']';
}

// Whether argument `i` of `node` only lends its dtype, device or shape: `x.type_as(other)`,
// `x.expand_as(other)`, `other.new_ones(size)`. The result does not depend on its values.
bool metadata_argument(const Node* node, size_t i) {
  static const std::unordered_set<std::string> second = {
      "aten::type_as", "aten::expand_as", "aten::view_as", "aten::reshape_as"};
  static const std::unordered_set<std::string> first = {
      "aten::new_ones", "aten::new_zeros", "aten::new_empty", "aten::new_full",
      "aten::zeros_like", "aten::ones_like", "aten::empty_like"};
  const std::string kind = node->kind().toQualString();
  if (i == 1 && second.count(kind) != 0) return true;
  if (i == 1 && kind == "aten::to" && is_tensor(node->input(1))) return true;
  return i == 0 && first.count(kind) != 0;
}

// The forward argument a tensor is read out of and the key it is read at (a dict's string
// key, a tuple's or list's index; "" for an Optional refined to its tensor), when `v` is such
// a read straight from a graph input; {"", ""} otherwise. Container and Optional arguments
// are not tensor inputs of the graph, so these reads are where their tensors enter it, and
// the Rust side treats them as the graph's inputs.
std::pair<std::string, std::string> argument_element(const Value* v) {
  const Node* n = v->node();
  // A state attribute read before forward writes it (see collect_state_reads).
  if (n->kind() == c10::prim::GetAttr) return {"self", n->s(c10::attr::name)};
  if (n->inputs().empty()) return {};
  const Value* source = n->input(0);
  if (source->node()->kind() != c10::prim::Param || source->offset() == 0) return {};
  auto container = source->type()->kind();
  if (container != c10::TypeKind::TupleType && container != c10::TypeKind::ListType &&
      container != c10::TypeKind::DictType && container != c10::TypeKind::OptionalType) {
    return {};
  }
  const std::string arg = source->debugName();
  const std::string kind = n->kind().toQualString();
  if (kind == "prim::unchecked_cast") return {arg, ""};
  if (kind == "prim::TupleUnpack" || kind == "prim::ListUnpack") {
    return {arg, std::to_string(v->offset())};
  }
  if ((kind == "aten::__getitem__" || kind == "prim::TupleIndex" || kind == "prim::DictIndex") &&
      n->inputs().size() >= 2) {
    auto key = torch::jit::toIValue(n->input(1));
    if (key && key->isString()) return {arg, key->toStringRef()};
    if (key && key->isInt()) return {arg, std::to_string(key->toInt())};
  }
  return {};
}

// Writes one captured value's static description: name, op, module hierarchy, source line,
// producers, and the control-flow block it sits in ("" at top level, "loop" or "if").
void write_value(std::ostringstream& meta, bool first, const Value* out, Node* node,
                 const std::vector<size_t>& producers, const char* block,
                 const TypePaths& type_paths,
                 const std::vector<size_t>* element_producers = nullptr) {
  meta << (first ? "" : ",") << "{\"name\":";
  json_escape(meta, out->debugName());
  auto [element_of, element_key] = argument_element(out);
  meta << ",\"element_of\":";
  json_escape(meta, element_of);
  meta << ",\"element_key\":";
  json_escape(meta, element_key);
  meta << ",\"op\":";
  json_escape(meta, node->kind().toQualString());
  meta << ",\"hierarchy\":";
  json_escape(meta, torch::jit::utils::getNodesModuleHierarchy(*node));
  meta << ",\"type_paths\":";
  write_type_paths(meta, node, type_paths);
  meta << ",\"source\":";
  json_escape(meta, source_of(node));
  meta << ",\"stack\":[";
  bool first_frame = true;
  for (const auto& frame : stack_of(node)) {
    if (!first_frame) meta << ',';
    first_frame = false;
    json_escape(meta, frame);
  }
  meta << "],\"block\":\"" << block << "\",\"inputs\":[";
  for (size_t p = 0; p < producers.size(); ++p) meta << (p ? "," : "") << producers[p];
  meta << "]";
  if (element_producers != nullptr) {
    meta << ",\"element_inputs\":[";
    for (size_t p = 0; p < element_producers->size(); ++p) {
      meta << (p ? "," : "") << (*element_producers)[p];
    }
    meta << "]";
  }
  meta << "}";
}

// Gives every tensor output of the nodes in `block` an id, recursing into the bodies of
// loops and the branches of ifs: the observe node inserted after each one fires once per
// iteration (a loop) or only when its branch is taken (an if), and the Rust side records
// each firing as its own value, in the order they happen.
void collect_values(torch::jit::Block* block, const char* kind, const TypePaths& type_paths,
                    const Dataflow& flow, std::unordered_map<const Value*, size_t>& ids,
                    std::vector<Value*>& captured, std::ostringstream& meta) {
  for (Node* node : block->nodes()) {
    if (is_structural(node)) continue;
    if (node->kind() == c10::prim::Loop) {
      for (auto* b : node->blocks()) {
        collect_values(b, "loop", type_paths, flow, ids, captured, meta);
      }
    } else if (node->kind() == c10::prim::If) {
      // An if inside a loop body still repeats per iteration: the loop kind wins.
      const char* inner = std::strcmp(kind, "loop") == 0 ? "loop" : "if";
      for (auto* b : node->blocks()) {
        collect_values(b, inner, type_paths, flow, ids, captured, meta);
      }
    }
    for (Value* out : node->outputs()) {
      if (!is_tensor(out) || InPlaceWrites::is_write_handle(out)) continue;
      auto twin = flow.shadowed.find(out);
      if (twin != flow.shadowed.end()) {
        ids[out] = ids.at(twin->second);
        continue;
      }
      std::vector<size_t> producers;
      for (size_t i = 0; i < node->inputs().size(); ++i) {
        if (!metadata_argument(node, i)) {
          collect_producers(node->input(i), ids, flow, producers, 0, node);
        }
      }
      // A loop's result is its body's last result: that firing is its producer too. An if's
      // result is its taken branch's: both branches' results are listed, and the Rust side
      // keeps the firings that happened, so what is computed from an if on an input value
      // is seen to come from the inputs (pairing accounts for the if's own result, which an
      // exporter that folds the if has no node for).
      if (node->kind() == c10::prim::Loop) {
        const Value* last = node->blocks()[0]->outputs()[out->offset() + 1];
        collect_producers(last, ids, flow, producers, 0, node);
      } else if (node->kind() == c10::prim::If) {
        for (auto* branch : node->blocks()) {
          collect_producers(branch->outputs()[out->offset()], ids, flow, producers, 0, node);
        }
      }
      // A tensor unpacked from a tuple built in the graph depends on that element alone (the
      // sizes a patch embedding returns next to its tensor, `x, (H, W)`): recorded apart,
      // for what is constant, while `inputs` keeps the whole tuple for the dataflow.
      const Value* element = packed_element(out);
      std::vector<size_t> element_producers;
      if (element != nullptr) {
        collect_producers(element, ids, flow, element_producers, 0, node);
      }
      write_value(meta, captured.empty(), out, node, producers, kind, type_paths,
                  element != nullptr ? &element_producers : nullptr);
      ids[out] = captured.size();
      captured.push_back(out);
    }
  }
}

// The first read of each state attribute (`state_writes`) before forward writes it: the state
// the module computes from, which another export may take as an input (recurrent state as
// an ONNX input). Captured like an argument, as element `self.NAME`, so that it can pair with
// that input; later reads see the updated value and stay uncaptured.
void collect_state_reads(torch::jit::Block* block, const std::vector<std::string>& state,
                         const TypePaths& type_paths,
                         std::unordered_map<const Value*, size_t>& ids,
                         std::vector<Value*>& captured, std::ostringstream& meta) {
  std::unordered_set<std::string> seen;
  for (Node* node : block->nodes()) {
    if (node->kind() == c10::prim::SetAttr) seen.insert(node->s(c10::attr::name));
    if (node->kind() != c10::prim::GetAttr || !is_tensor(node->output())) continue;
    const std::string name = node->s(c10::attr::name);
    if (std::find(state.begin(), state.end(), name) == state.end() || !seen.insert(name).second) {
      continue;
    }
    write_value(meta, captured.empty(), node->output(), node, {}, "", type_paths);
    ids[node->output()] = captured.size();
    captured.push_back(node->output());
  }
}

// Every module of the loaded archive with its qualified name and class, so the Rust side can
// restore path levels the call stack does not show (a container iterated, not called; one
// instance shared by several parents).
void write_modules(const torch::jit::Module& root, std::ostringstream& meta) {
  bool first = true;
  for (const auto& named : root.named_modules()) {
    if (!first) meta << ',';
    first = false;
    meta << "{\"path\":";
    json_escape(meta, named.name);
    meta << ",\"class\":";
    auto type = named.value.type();
    json_escape(meta, type && type->name() ? type->name()->name() : std::string());
    meta << '}';
  }
}

// Every parameter and buffer by its full name, in registration order, with where its data
// is: two names of one tensor (a module held under two attributes, `self.b = self.a`) have
// the same place, which is how Rust tells such attributes apart from look-alike modules.
void write_state(const torch::jit::Module& root, std::ostringstream& meta) {
  bool first = true;
  auto write = [&](const std::string& name, const at::Tensor& t) {
    if (!first) meta << ',';
    first = false;
    std::ostringstream place;
    place << (t.has_storage() ? t.storage().data() : nullptr) << '@' << t.storage_offset()
          << ':' << t.sizes() << ':' << t.strides();
    meta << '[';
    json_escape(meta, name);
    meta << ',';
    json_escape(meta, place.str());
    meta << ']';
  };
  for (const auto& p : root.named_parameters()) write(p.name, p.value);
  for (const auto& b : root.named_buffers()) write(b.name, b.value);
}

// The argument that switches an op into training behaviour, for the ops a model traced
// without `model.eval()` records with it set: batch_norm's `training` (batch statistics),
// dropout's `train` (random zeroing).
int training_argument(const Node* node) {
  static const std::unordered_map<std::string, int> positions = {
      {"aten::batch_norm", 5},     {"aten::dropout", 2},       {"aten::dropout_", 2},
      {"aten::feature_dropout", 2}, {"aten::alpha_dropout", 2}, {"aten::feature_alpha_dropout", 2}};
  auto it = positions.find(node->kind().toQualString());
  return it == positions.end() ? -1 : it->second;
}

// A CUDA device a node's constant argument names (`device=cuda:0`, a tensor constant on the
// GPU): what a trace made on a GPU records, and what cannot run on align-check's CPU.
std::string cuda_argument(const Node* node) {
  for (const Value* in : node->inputs()) {
    auto constant = torch::jit::toIValue(in);
    if (!constant) continue;
    if (constant->isDevice() && constant->toDevice().is_cuda()) return constant->toDevice().str();
    if (constant->isTensor() && constant->toTensor().is_cuda())
      return constant->toTensor().device().str();
  }
  return "";
}

void write_site(std::ostringstream& meta, bool& first, Node* node, const std::string& device) {
  meta << (first ? "" : ",") << "{\"op\":";
  first = false;
  json_escape(meta, node->kind().toQualString());
  meta << ",\"hierarchy\":";
  json_escape(meta, torch::jit::utils::getNodesModuleHierarchy(*node));
  meta << ",\"source\":";
  json_escape(meta, source_of(node));
  meta << ",\"device\":";
  json_escape(meta, device);
  meta << '}';
}

// Nodes that make the graph unfit to compare as saved: ops fixed in training mode
// (`training_ops`) and ops that put tensors on a GPU (`cuda_ops`), each with where it is.
void write_hazards(torch::jit::Block* block, bool& first_training, bool& first_cuda,
                   std::ostringstream& training, std::ostringstream& cuda) {
  for (Node* node : block->nodes()) {
    for (auto* b : node->blocks()) write_hazards(b, first_training, first_cuda, training, cuda);
    int arg = training_argument(node);
    if (arg >= 0 && static_cast<size_t>(arg) < node->inputs().size()) {
      auto flag = torch::jit::toIValue(node->input(arg));
      // A BatchNorm without running statistics (track_running_stats=False) normalises with
      // the batch's in eval mode too: its running_mean argument is None, and it is not a
      // training-mode trace.
      auto running_mean = node->inputs().size() > 3 ? torch::jit::toIValue(node->input(3))
                                                     : c10::optional<c10::IValue>();
      bool no_running_stats = node->kind() == c10::aten::batch_norm && running_mean &&
                              running_mean->isNone();
      if (flag && flag->isBool() && flag->toBool() && !no_running_stats)
        write_site(training, first_training, node, "");
    }
    std::string device = cuda_argument(node);
    if (!device.empty()) write_site(cuda, first_cuda, node, device);
  }
}

// The plan's graph is a copy, so the module's own forward stays as saved for ac_forward.
std::shared_ptr<torch::jit::Graph> inlined_forward(const torch::jit::Module& module) {
  auto& forward = torch::jit::toGraphFunction(module.get_method("forward").function());
  std::shared_ptr<torch::jit::Graph> graph = forward.graph()->copy();
  inline_everything(*graph);
  return graph;
}

// The Rust side reads what to pass from the "inputs" list: each argument's graph name, its
// type as Python writes it (`int`, `Optional[Tensor]`, `Dict[str, Tensor]`) and its default,
// from forward's schema; tensor arguments get the first ids.
void write_inputs(torch::jit::Graph& graph, const c10::FunctionSchema& schema,
                  std::unordered_map<const Value*, size_t>& ids, std::vector<Value*>& captured,
                  std::ostringstream& meta) {
  auto graph_inputs = graph.inputs();
  // Input 0 is `self`; the rest are the user's arguments.
  for (size_t i = 1; i < graph_inputs.size(); ++i) {
    Value* in = graph_inputs[i];
    if (i > 1) meta << ',';
    meta << "{\"name\":";
    json_escape(meta, in->debugName());
    const c10::Argument* arg = i < schema.arguments().size() ? &schema.arguments()[i] : nullptr;
    meta << ",\"type\":";
    json_escape(meta, arg != nullptr ? arg->type()->annotation_str() : in->type()->str());
    meta << ",\"default\":";
    if (arg != nullptr && arg->default_value()) {
      std::ostringstream value;
      value << *arg->default_value();
      json_escape(meta, value.str());
    } else {
      meta << "null";
    }
    meta << '}';
    if (is_tensor(in)) {
      ids[in] = captured.size();
      captured.push_back(in);
    }
  }
}

// Captured inputs lead the "values" list, in the "inputs" list's order, so ids match positions.
void write_input_values(const std::vector<Value*>& captured, std::ostringstream& meta) {
  for (size_t k = 0; k < captured.size(); ++k) {
    if (k > 0) meta << ',';
    meta << "{\"name\":";
    json_escape(meta, captured[k]->debugName());
    meta << ",\"op\":\"input\",\"hierarchy\":\"\",\"source\":\"\",\"block\":\"\",\"inputs\":[]}";
  }
}

// Inputs in another float type (a float16 ONNX model's) are converted to the module's own.
std::string parameter_dtype(const torch::jit::Module& module) {
  // The element type the module computes in is that of its first floating-point parameter.
  for (const auto& p : module.parameters()) {
    if (at::isFloatingType(p.scalar_type())) return c10::toString(p.scalar_type());
  }
  return "";
}

// One walk of the graph fills both hazard lists: `"training_ops":[...],"cuda_ops":[...]`.
std::string hazard_lists(torch::jit::Block* block) {
  std::ostringstream training, cuda;
  bool first_training = true, first_cuda = true;
  write_hazards(block, first_training, first_cuda, training, cuda);
  return "\"training_ops\":[" + training.str() + "],\"cuda_ops\":[" + cuda.str() + "]";
}

// The captured values a returned value's leaves come from, in the order `flatten` lists
// them: tuples, lists and dicts built in the graph are looked through; a leaf that is not a
// captured tensor is null.
void write_leaves(const Value* v, const std::unordered_map<const Value*, size_t>& ids,
                  std::ostringstream& meta, bool& first, int depth) {
  const Node* n = v->node();
  auto k = n->kind();
  if (depth < 8 && (k == c10::prim::TupleConstruct || k == c10::prim::ListConstruct)) {
    for (const Value* in : n->inputs()) write_leaves(in, ids, meta, first, depth + 1);
    return;
  }
  if (depth < 8 && k == c10::prim::DictConstruct) {
    // Inputs alternate key, value.
    for (size_t i = 1; i < n->inputs().size(); i += 2) {
      write_leaves(n->input(i), ids, meta, first, depth + 1);
    }
    return;
  }
  if (!first) meta << ',';
  first = false;
  auto it = ids.find(v);
  if (it == ids.end()) meta << "null"; else meta << it->second;
}

void write_outputs(torch::jit::Graph& graph, const std::unordered_map<const Value*, size_t>& ids,
                   std::ostringstream& meta) {
  bool first = true;
  for (Value* o : graph.outputs()) write_leaves(o, ids, meta, first, 0);
}

// What forward changes in the module itself: attributes it assigns (`self.state = h`,
// prim::SetAttr) and buffers it writes in place (`self.state.copy_(h)` in a trace). A
// module like that computes something else on every call; the check runs it from the state
// it was loaded with, every time.
void collect_state_writes(torch::jit::Block* block, std::vector<std::string>& out) {
  for (Node* node : block->nodes()) {
    for (auto* b : node->blocks()) collect_state_writes(b, out);
    std::string name;
    if (node->kind() == c10::prim::SetAttr) {
      name = node->s(c10::attr::name);
    } else {
      const std::string kind = node->kind().toQualString();
      bool in_place = kind.size() > 1 && kind.back() == '_' && kind.rfind("aten::", 0) == 0 &&
                      kind.find("__") == std::string::npos;
      if (in_place && !node->inputs().empty() &&
          node->input(0)->node()->kind() == c10::prim::GetAttr) {
        name = node->input(0)->node()->s(c10::attr::name);
      }
    }
    if (!name.empty() && std::find(out.begin(), out.end(), name) == out.end()) out.push_back(name);
  }
}

// Observe nodes hand each captured value to the sink as it is computed, tagged with its id.
void insert_observers(torch::jit::Graph& graph, const std::vector<Value*>& captured) {
  // An observe node right after each captured value's producer (graph inputs: before the
  // first node, one after the other so they fire in argument order), carrying the value's
  // position in the metadata as its id. Values fire in execution order, which the Rust side
  // keeps.
  static const c10::Symbol observe_op = c10::Symbol::fromQualString("align_check::observe");
  Node* inputs_end = graph.param_node();
  for (size_t id = 0; id < captured.size(); ++id) {
    Value* v = captured[id];
    bool is_input = v->node()->kind() == c10::prim::Param;
    Node* after = is_input ? inputs_end : v->node();
    torch::jit::WithInsertPoint guard(after->next());
    Value* id_const = graph.insertConstant(static_cast<int64_t>(id));
    Node* observe = graph.insertNode(graph.create(observe_op, {v, id_const}, 0));
    if (is_input) inputs_end = observe;
  }
}

// Everything the Rust side needs is built once per load: the metadata JSON and the capture graph.
Plan* build_plan(const std::string& path) {
  auto plan = std::make_unique<Plan>();
  // Parameters saved from a GPU are mapped to the CPU, where align-check runs the model.
  plan->module = torch::jit::load(path, c10::Device(c10::kCPU));
  const bool saved_training = plan->module.is_training();
  plan->module.eval();
  std::shared_ptr<torch::jit::Graph> graph = inlined_forward(plan->module);
  // Values inside fused layer ops (see shadow.cpp), numbered and observed like the rest.
  auto shadowed = insert_shadows(*graph);

  std::ostringstream meta;
  std::unordered_map<const Value*, size_t> ids;
  std::vector<Value*> captured;
  meta << "{\"inputs\":[";
  const c10::FunctionSchema& schema = plan->module.get_method("forward").function().getSchema();
  plan->arguments.assign(schema.arguments().begin() + (schema.arguments().empty() ? 0 : 1),
                         schema.arguments().end());
  write_inputs(*graph, schema, ids, captured, meta);
  meta << "],\"values\":[";
  write_input_values(captured, meta);
  std::vector<std::string> state_writes;
  collect_state_writes(graph->block(), state_writes);
  const TypePaths type_paths = unique_type_paths(plan->module);
  collect_state_reads(graph->block(), state_writes, type_paths, ids, captured, meta);
  Dataflow flow;
  flow.shadowed = std::move(shadowed);
  collect_carried(graph->block(), flow.carried);
  flow.writes.collect(graph->block());
  // A dry pass numbers every value first, so that a carried parameter can name the body
  // result it reads from the second iteration on, which the body computes after its reader.
  {
    std::vector<Value*> scratch = captured;
    std::ostringstream ignored;
    collect_values(graph->block(), "", type_paths, flow, ids, scratch, ignored);
  }
  collect_values(graph->block(), "", type_paths, flow, ids, captured, meta);
  const std::string hazards = hazard_lists(graph->block());
  meta << "],\"saved_training\":" << (saved_training ? "true" : "false");
  meta << ",\"parameter_dtype\":";
  json_escape(meta, parameter_dtype(plan->module));
  meta << ',' << hazards << ",\"modules\":[";
  write_modules(plan->module, meta);
  meta << "],\"state\":[";
  write_state(plan->module, meta);
  meta << "],\"outputs\":[";
  write_outputs(*graph, ids, meta);
  meta << "],\"state_writes\":[";
  for (size_t i = 0; i < state_writes.size(); ++i) {
    if (i > 0) meta << ',';
    json_escape(meta, state_writes[i]);
  }
  meta << "]}";
  if (!state_writes.empty()) {
    plan->state = std::make_unique<StateSnapshot>();
    plan->state->take(plan->module);
  }

  // Less `self`.
  plan->n_user_inputs = graph->inputs().size() - 1;
  plan->n_graph_outputs = graph->outputs().size();
  insert_observers(*graph, captured);
  plan->capture_fn = std::make_unique<torch::jit::GraphFunction>(
      "align_check_capture", graph, nullptr);
  plan->meta_json = meta.str();
  return plan.release();
}

std::string join_path(const std::string& path, const std::string& key) {
  return path.empty() ? key : path + "." + key;
}

// Flattens tuples, lists and dicts of tensors into `out`, in order, naming each leaf by its
// path in the returned value (`0`, `1.hidden`, `last_hidden_state`; `output` for a single
// tensor), which is how outputs are matched to the ONNX model's by name. Python numbers
// become 0-d tensors; any other non-tensor leaf (a string, an object) is reported as an
// error: the tool compares tensors.
void flatten(const c10::IValue& v, const std::string& path, std::vector<at::Tensor>& out,
             std::vector<std::string>& names) {
  const std::string name = path.empty() ? "output" : path;
  if (v.isTensor()) {
    out.push_back(v.toTensor());
    names.push_back(name);
  } else if (v.isTuple()) {
    const auto& elements = v.toTupleRef().elements();
    for (size_t i = 0; i < elements.size(); ++i) {
      flatten(elements[i], join_path(path, std::to_string(i)), out, names);
    }
  } else if (v.isList()) {
    const auto list = v.toListRef();
    for (size_t i = 0; i < list.size(); ++i) {
      flatten(list[i], join_path(path, std::to_string(i)), out, names);
    }
  } else if (v.isGenericDict()) {
    size_t i = 0;
    for (const auto& kv : v.toGenericDict()) {
      const c10::IValue& key = kv.key();
      std::string k = key.isString() ? key.toStringRef()
                      : key.isInt()  ? std::to_string(key.toInt())
                                     : std::to_string(i);
      flatten(kv.value(), join_path(path, k), out, names);
      ++i;
    }
  } else if (v.isNone()) {
    // Optional outputs that are absent contribute nothing.
  } else if (v.isInt() || v.isDouble() || v.isBool()) {
    // A Python number among the outputs: the legacy exporter makes it a 0-d Constant output,
    // so it becomes a 0-d tensor of the same kind here and is compared like one.
    out.push_back(v.isInt()      ? at::scalar_tensor(v.toInt(), at::kLong)
                  : v.isDouble() ? at::scalar_tensor(v.toDouble(), at::kDouble)
                                 : at::scalar_tensor(v.toBool(), at::kBool));
    names.push_back(name);
  } else {
    throw std::runtime_error("the model returns a value of type " + v.tagKind() +
                             ", which is not a tensor or a tuple/list/dict of tensors");
  }
}

at::Tensor** to_heap(const std::vector<at::Tensor>& tensors) {
  auto** arr = static_cast<at::Tensor**>(std::malloc(sizeof(at::Tensor*) * (tensors.size() + 1)));
  for (size_t i = 0; i < tensors.size(); ++i) arr[i] = new at::Tensor(tensors[i]);
  arr[tensors.size()] = nullptr;
  return arr;
}

}  // namespace

// forward's arguments: `AcArgs`, declared in ac_args.h.

namespace {

struct ArgReader {
  const AcArgs& a;
  size_t c = 0, f = 0, s = 0, t = 0;

  [[noreturn]] static void short_encoding() {
    throw std::runtime_error("internal error: the forward arguments were encoded short");
  }
  int64_t code() { return c < a.n_codes ? a.codes[c++] : (short_encoding(), 0); }
  double real() { return f < a.n_floats ? a.floats[f++] : (short_encoding(), 0.0); }
  std::string text() { return s < a.n_strings ? a.strings[s++] : (short_encoding(), ""); }
  const at::Tensor& tensor() {
    if (t >= a.n_tensors) short_encoding();
    return *static_cast<const at::Tensor*>(a.tensors[t++]);
  }
};

// One argument value, built in the type the schema asks for so that typed containers
// (List[Tensor], Dict[str, Tensor]) are what the interpreter's checks expect.
c10::IValue read_value(ArgReader& r, c10::TypePtr type, const c10::Argument* arg) {
  if (auto optional = type->cast<c10::OptionalType>()) type = optional->getElementType();
  switch (r.code()) {
    case 0: return r.tensor();
    case 1: return r.code();
    case 2: return r.real();
    case 3: return r.code() != 0;
    case 4: return r.text();
    case 5: return c10::IValue();
    case 6:
      if (arg != nullptr && arg->default_value()) return *arg->default_value();
      throw std::runtime_error("argument '" + (arg ? arg->name() : std::string("?")) +
                               "' has no default value");
    case 7: {
      auto n = static_cast<size_t>(r.code());
      auto tuple = type->cast<c10::TupleType>();
      std::vector<c10::IValue> elements;
      for (size_t i = 0; i < n; ++i) {
        c10::TypePtr element = tuple && i < tuple->elements().size()
                                   ? tuple->elements()[i]
                                   : c10::TypePtr(c10::TensorType::get());
        elements.push_back(read_value(r, element, nullptr));
      }
      return c10::ivalue::Tuple::create(std::move(elements));
    }
    case 8: {
      auto n = static_cast<size_t>(r.code());
      auto list_type = type->cast<c10::ListType>();
      c10::TypePtr element =
          list_type ? list_type->getElementType() : c10::TypePtr(c10::TensorType::get());
      c10::impl::GenericList list(element);
      for (size_t i = 0; i < n; ++i) list.push_back(read_value(r, element, nullptr));
      return list;
    }
    case 9: {
      auto n = static_cast<size_t>(r.code());
      auto dict_type = type->cast<c10::DictType>();
      c10::TypePtr key = dict_type ? dict_type->getKeyType() : c10::TypePtr(c10::StringType::get());
      c10::TypePtr value =
          dict_type ? dict_type->getValueType() : c10::TypePtr(c10::TensorType::get());
      c10::impl::GenericDict dict(key, value);
      for (size_t i = 0; i < n; ++i) {
        std::string k = r.text();
        dict.insert(c10::IValue(k), read_value(r, value, nullptr));
      }
      return dict;
    }
    default:
      throw std::runtime_error("internal error: unknown argument code");
  }
}

// The interpreter's stack for forward (without `self`), from the encoded arguments. Each
// run of a module that writes its own state starts from the state it was loaded with.
std::vector<c10::IValue> make_stack(const Plan& plan, const AcArgs& args) {
  if (plan.state) plan.state->restore();
  ArgReader reader{args};
  std::vector<c10::IValue> stack;
  stack.reserve(plan.n_user_inputs + 1);
  for (size_t i = 0; i < plan.n_user_inputs; ++i) {
    const c10::Argument* arg = i < plan.arguments.size() ? &plan.arguments[i] : nullptr;
    c10::TypePtr type = arg != nullptr ? arg->type() : c10::TypePtr(c10::AnyType::get());
    stack.push_back(read_value(reader, type, arg));
  }
  return stack;
}

char* join_names(const std::vector<std::string>& names) {
  std::string joined;
  for (size_t i = 0; i < names.size(); ++i) joined += (i ? "\n" : "") + names[i];
  return dup_string(joined);
}

}  // namespace

extern "C" {

void ac_free_string(char* s) { std::free(s); }

// Loads `path` and prepares the instrumented graph. Returns null and sets `err` on failure.
void* ac_load(const char* path, char** err) {
  try {
    register_ops();
    return build_plan(path);
  } catch (const std::exception& e) {
    set_error(err, short_message(e.what()));
  } catch (...) {
    set_error(err, "unknown C++ exception while loading the TorchScript module");
  }
  return nullptr;
}

void ac_free(void* plan) { delete static_cast<Plan*>(plan); }

const char* ac_meta(void* plan) { return static_cast<Plan*>(plan)->meta_json.c_str(); }

size_t ac_num_inputs(void* plan) { return static_cast<Plan*>(plan)->n_user_inputs; }

// Runs the instrumented graph on the encoded forward arguments, handing every captured value
// to `sink(ctx, id, tensor)` as it is computed (the sink owns the tensor). On success returns
// the flattened graph outputs as a null-terminated array (`*n_outputs` of them) and their
// paths in `*names` (one per line, freed with ac_free_string); the caller owns each tensor and
// frees the array with ac_free_array.
void** ac_capture(void* handle, const AcArgs* args, Sink sink, void* ctx, size_t* n_outputs,
                  char** names, char** err) {
  struct SinkScope {
    SinkScope(Sink s, void* c) { current_sink = s; current_ctx = c; }
    ~SinkScope() { current_sink = nullptr; current_ctx = nullptr; }
  };
  try {
    auto* plan = static_cast<Plan*>(handle);
    torch::NoGradGuard no_grad;
    SinkScope scope(sink, ctx);
    std::vector<c10::IValue> stack = make_stack(*plan, *args);
    stack.insert(stack.begin(), plan->module._ivalue());
    plan->capture_fn->run(stack);
    std::vector<at::Tensor> flat;
    std::vector<std::string> paths;
    for (const auto& v : stack) flatten(v, "", flat, paths);
    *n_outputs = flat.size();
    *names = join_names(paths);
    return reinterpret_cast<void**>(to_heap(flat));
  } catch (const std::exception& e) {
    set_error(err, short_message(e.what()));
  } catch (...) {
    set_error(err, "unknown C++ exception while running the TorchScript module");
  }
  return nullptr;
}

// Runs the module's own forward, uninstrumented: the reference for "capture changes
// nothing" and the floor for speed measurements. Returns the flattened outputs and their
// paths, as ac_capture does.
void** ac_forward(void* handle, const AcArgs* args, size_t* n_outputs, char** names,
                  char** err) {
  try {
    auto* plan = static_cast<Plan*>(handle);
    torch::NoGradGuard no_grad;
    std::vector<c10::IValue> stack = make_stack(*plan, *args);
    c10::IValue result = plan->module.forward(stack);
    std::vector<at::Tensor> flat;
    std::vector<std::string> paths;
    flatten(result, "", flat, paths);
    *n_outputs = flat.size();
    *names = join_names(paths);
    return reinterpret_cast<void**>(to_heap(flat));
  } catch (const std::exception& e) {
    set_error(err, short_message(e.what()));
  } catch (...) {
    set_error(err, "unknown C++ exception while running the TorchScript module");
  }
  return nullptr;
}

// Casts the module's floating-point parameters and buffers to float64, for the float64
// reference run that measures how far float32 rounding alone moves the outputs. A module that
// writes its own state has its snapshot taken again, so that the state restored before each
// run is the float64 one. Returns 0, or 1 with `err` set.
int ac_to_float64(void* handle, char** err) {
  try {
    auto* plan = static_cast<Plan*>(handle);
    if (plan->state) plan->state->restore();
    // Module::to(dtype) would cast integer buffers too (an attention-bias index table),
    // which then can no longer index: only floating-point tensors change type.
    auto cast = [](at::Tensor t) {
      if (t.is_floating_point()) t.set_data(t.to(at::kDouble));
    };
    for (const auto& p : plan->module.parameters(/*recurse=*/true)) cast(p);
    for (const auto& b : plan->module.buffers(/*recurse=*/true)) cast(b);
    if (plan->state) {
      plan->state = std::make_unique<StateSnapshot>();
      plan->state->take(plan->module);
    }
    return 0;
  } catch (const std::exception& e) {
    set_error(err, short_message(e.what()));
  } catch (...) {
    set_error(err, "unknown C++ exception while casting the TorchScript module to float64");
  }
  return 1;
}

void ac_free_array(void** arr) { std::free(arr); }

}  // extern "C"
