// Shadow decompositions of fused ATen ops whose computation spans several sub-modules.
//
// Under torch.no_grad()/torch.inference_mode() an nn.TransformerEncoderLayer traces as one
// aten::_transformer_encoder_layer_fwd and an nn.MultiheadAttention as one
// aten::_native_multi_head_attention, while both ONNX exporters write the computation out
// under the sub-modules' scopes (self_attn, norm1, linear1, ...). With one value for the whole
// layer, a fault inside can only be reported at the layer. Before each such node this file
// inserts the same math written with standard aten ops (the slow path of
// F.multi_head_attention_forward, layer_norm, linear, the activation, the residual adds), fed
// the fused node's own inputs. Its values are observed like any other, each under the module
// that owns the parameters it reads (a stage reading `...self_attn.in_proj_weight` and
// `...self_attn.out_proj.weight` belongs to `self_attn`; one reading none, to the fused op's
// own module), so they pair with the ONNX nodes of those scopes. Nothing reads them: the fused
// op's own output stays what its consumers read, so the model computes what it computed.
//
// A node whose shape the decomposition does not cover (an attention mask, a cross-attention
// whose query, key and value differ, a non-constant flag) gets no shadow and stays one layer.

#include <torch/jit.h>
#include <torch/script.h>
#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/passes/inliner.h>

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

using torch::jit::Node;
using torch::jit::Value;
using Shadowed = std::unordered_map<const Value*, const Value*>;

// The header declares this constructor but the wheel's libtorch_cpu does not export it (the
// tracer and the inliner are its only callers, inside the library). The definition the
// header implies, for the frames this file adds to a call stack.
torch::jit::ModuleInstanceInfo::ModuleInstanceInfo(c10::ClassTypePtr module_type,
                                                   std::string instance_name)
    : module_type_(std::move(module_type)), instance_name_(std::move(instance_name)) {}

namespace {

// The math of each stage, as F.multi_head_attention_forward's slow path traces it (batch-first
// input transposed to sequence-first, the packed in-projection, heads split by
// unflatten/select/view), so that the values line up with what the exporters write. The
// attention of `need_weights=False` is scaled_dot_product_attention, written out as both
// exporters decompose it (query and transposed key each scaled by the square root of the
// scale, MatMul, Softmax, MatMul), so that a fault in the scores or the softmax has a value of
// its own to show in.
const char* const kSource = R"JIT(
def attention(x: Tensor, embed_dim: int, num_heads: int, qkv_weight: Tensor, qkv_bias: Tensor,
              proj_weight: Tensor, proj_bias: Tensor) -> Tensor:
    query = x.transpose(1, 0)
    tgt_len = query.size(0)
    bsz = query.size(1)
    head_dim = embed_dim // num_heads
    proj = torch.linear(query, qkv_weight, qkv_bias)
    proj = proj.unflatten(-1, [3, embed_dim]).unsqueeze(0).transpose(0, -2).squeeze(-2).contiguous()
    q = proj[0].view(tgt_len, bsz * num_heads, head_dim).transpose(0, 1)
    k = proj[1].view(tgt_len, bsz * num_heads, head_dim).transpose(0, 1)
    v = proj[2].view(tgt_len, bsz * num_heads, head_dim).transpose(0, 1)
    q = q.view(bsz, num_heads, tgt_len, head_dim)
    k = k.view(bsz, num_heads, tgt_len, head_dim)
    v = v.view(bsz, num_heads, tgt_len, head_dim)
    root_scale = (1.0 / float(head_dim) ** 0.5) ** 0.5
    scores = torch.matmul(q * root_scale, k.transpose(-2, -1) * root_scale)
    weights = torch.softmax(scores, -1)
    out = torch.matmul(weights, v)
    out = out.permute(2, 0, 1, 3).reshape(bsz * tgt_len, embed_dim)
    out = torch.linear(out, proj_weight, proj_bias)
    out = out.view(tgt_len, bsz, out.size(1))
    return out.transpose(1, 0)

def layer_norm(x: Tensor, embed_dim: int, weight: Tensor, bias: Tensor, eps: float) -> Tensor:
    return torch.layer_norm(x, [embed_dim], weight, bias, eps)

def linear(x: Tensor, weight: Tensor, bias: Tensor) -> Tensor:
    return torch.linear(x, weight, bias)

def relu(x: Tensor) -> Tensor:
    return torch.relu(x)

def gelu(x: Tensor) -> Tensor:
    return torch.gelu(x)

def add(x: Tensor, y: Tensor) -> Tensor:
    return x + y
)JIT";

// Compiled once per process; the functions' graphs are copied into each model's graph.
torch::jit::CompilationUnit& stages() {
  static std::shared_ptr<torch::jit::CompilationUnit> unit = torch::jit::compile(kSource);
  return *unit;
}

// A module on the attribute path from the model to a parameter: its attribute name and type.
using Level = std::pair<std::string, c10::ClassTypePtr>;
using Chain = std::vector<Level>;

// The modules from the model down to the one holding parameter `v` (a prim::GetAttr chain
// from forward's `self`), or nullopt where `v` is not read that way.
std::optional<Chain> owner_chain(const Value* v) {
  const Node* n = v->node();
  if (n->kind() != c10::prim::GetAttr) return std::nullopt;
  Chain chain;
  const Value* m = n->input(0);
  while (m->node()->kind() == c10::prim::GetAttr) {
    auto type = m->type()->cast<c10::ClassType>();
    if (!type) return std::nullopt;
    chain.emplace_back(m->node()->s(c10::attr::name), type);
    m = m->node()->input(0);
  }
  if (m->node()->kind() != c10::prim::Param) return std::nullopt;
  return Chain(chain.rbegin(), chain.rend());
}

// The deepest module owning every parameter in `params` (their chains' common prefix), or
// nullopt where one of them is not a parameter of the model.
std::optional<Chain> common_owner(const std::vector<Value*>& params) {
  std::optional<Chain> common;
  for (const Value* p : params) {
    auto chain = owner_chain(p);
    if (!chain) return std::nullopt;
    if (!common) {
      common = std::move(chain);
      continue;
    }
    size_t k = 0;
    while (k < common->size() && k < chain->size() && (*common)[k].first == (*chain)[k].first &&
           (*common)[k].second == (*chain)[k].second) {
      ++k;
    }
    common->resize(k);
  }
  return common;
}

// Where the fused node sits and what its stages are attributed under.
struct Site {
  torch::jit::Graph* graph;
  Node* fused;
  std::optional<Chain> own;  // the module owning all of the fused node's parameters
};

// The fused node's call stack with one frame more for each module between its own and the
// stage's owner, so that getNodesModuleHierarchy and the type paths name the sub-module as if
// the layer had been traced through its slow path.
std::optional<torch::jit::InlinedCallStackPtr> stage_callstack(const Site& site,
                                                               const std::optional<Chain>& owner) {
  auto base = site.fused->callstack();
  if (!site.own || !owner || owner->size() <= site.own->size()) return base;
  std::vector<torch::jit::InlinedCallStackEntry> frames;
  if (base) frames = (*base)->vec();
  torch::jit::Function* fn = frames.empty() ? nullptr : std::get<0>(frames.back());
  for (size_t k = site.own->size(); k < owner->size(); ++k) {
    frames.emplace_back(fn, site.fused->sourceRange(),
                        torch::jit::ModuleInstanceInfo((*owner)[k].second, (*owner)[k].first));
  }
  torch::jit::InlinedCallStackPtr cs;
  for (auto it = frames.rbegin(); it != frames.rend(); ++it) {
    const auto& [f, range, info] = *it;
    cs = cs ? c10::make_intrusive<torch::jit::InlinedCallStack>(cs, f, range, info)
            : c10::make_intrusive<torch::jit::InlinedCallStack>(f, range, info);
  }
  return cs;
}

// Inserts stage `name` before the fused node on `args`; its nodes take the fused node's source
// and the call stack of the module owning `params`. Returns the stage's result.
Value* stage(const Site& site, const char* name, const std::vector<Value*>& args,
             const std::vector<Value*>& params) {
  auto& fn = torch::jit::toGraphFunction(stages().get_function(name));
  auto callee = fn.graph()->copy();
  torch::jit::Inline(*callee);
  Node* first_before = site.fused->prev();
  torch::jit::WithInsertPoint guard(site.fused);
  Value* out = torch::jit::insertGraph(*site.graph, *callee, args).at(0);
  auto callstack = params.empty() ? site.fused->callstack()
                                  : stage_callstack(site, common_owner(params));
  for (Node* n = first_before->next(); n != site.fused; n = n->next()) {
    n->setSourceRange(site.fused->sourceRange());
    if (callstack) n->setCallStack(*callstack);
  }
  return out;
}

bool is_none(const Value* v) { return v->type()->kind() == c10::TypeKind::NoneType; }

// aten::_transformer_encoder_layer_fwd(src, embed_dim, num_heads, qkv_weight, qkv_bias,
// proj_weight, proj_bias, use_gelu, norm_first, eps, norm_weight_1, norm_bias_1,
// norm_weight_2, norm_bias_2, ffn_weight_1, ffn_bias_1, ffn_weight_2, ffn_bias_2, mask,
// mask_type): nn.TransformerEncoderLayer.forward's slow path, post- or pre-norm.
Value* shadow_encoder_layer(const Site& site) {
  Node* f = site.fused;
  auto gelu = torch::jit::toIValue(f->input(7));
  auto norm_first = torch::jit::toIValue(f->input(8));
  if (!gelu || !norm_first || !is_none(f->input(18))) return nullptr;
  auto in = [&](size_t i) { return f->input(i); };
  auto norm = [&](Value* x, size_t w) {
    return stage(site, "layer_norm", {x, in(1), in(w), in(w + 1), in(9)}, {in(w), in(w + 1)});
  };
  auto attend = [&](Value* x) {
    return stage(site, "attention", {x, in(1), in(2), in(3), in(4), in(5), in(6)},
                 {in(3), in(4), in(5), in(6)});
  };
  auto feed_forward = [&](Value* x) {
    Value* h = stage(site, "linear", {x, in(14), in(15)}, {in(14), in(15)});
    h = stage(site, gelu->toBool() ? "gelu" : "relu", {h}, {});
    return stage(site, "linear", {h, in(16), in(17)}, {in(16), in(17)});
  };
  Value* x = in(0);
  if (norm_first->toBool()) {
    x = stage(site, "add", {x, attend(norm(x, 10))}, {});
    return stage(site, "add", {x, feed_forward(norm(x, 12))}, {});
  }
  x = norm(stage(site, "add", {x, attend(x)}, {}), 10);
  return norm(stage(site, "add", {x, feed_forward(x)}, {}), 12);
}

// aten::_native_multi_head_attention(query, key, value, embed_dim, num_head, qkv_weight,
// qkv_bias, proj_weight, proj_bias, mask, need_weights, average_attn_weights, mask_type):
// self-attention (one value for query, key and value) without the weights output, as the
// slow path computes it. With `need_weights` the node's second output is the module's other
// output; a shadow of the first alone left the module's attention output uncompared inside
// it (measured: an out_proj fault reported at the residual Add after it), so such a node
// stays one layer.
Value* shadow_attention(const Site& site) {
  Node* f = site.fused;
  auto need_weights = torch::jit::toIValue(f->input(10));
  if (f->input(0) != f->input(1) || f->input(0) != f->input(2) || !is_none(f->input(9)) ||
      !need_weights || need_weights->toBool()) {
    return nullptr;
  }
  std::vector<Value*> params = {f->input(5), f->input(6), f->input(7), f->input(8)};
  return stage(site, "attention",
        {f->input(0), f->input(3), f->input(4), f->input(5), f->input(6), f->input(7),
         f->input(8)},
        params);
}

bool has_shadow(const Node* n) {
  const std::string kind = n->kind().toQualString();
  return kind == "aten::_transformer_encoder_layer_fwd" ||
         kind == "aten::_native_multi_head_attention";
}

// The tensor parameters a fused node reads, for the module that owns them all.
std::vector<Value*> tensor_parameters(Node* n) {
  std::vector<Value*> out;
  for (Value* v : n->inputs()) {
    if (v->node()->kind() == c10::prim::GetAttr &&
        v->type()->kind() == c10::TypeKind::TensorType) {
      out.push_back(v);
    }
  }
  return out;
}

void shadow_block(torch::jit::Graph& graph, torch::jit::Block* block, Shadowed& shadowed) {
  std::vector<Node*> fused;
  for (Node* n : block->nodes()) {
    for (auto* b : n->blocks()) shadow_block(graph, b, shadowed);
    if (has_shadow(n)) fused.push_back(n);
  }
  for (Node* n : fused) {
    Site site{&graph, n, common_owner(tensor_parameters(n))};
    Node* before = n->prev();
    try {
      Value* result =
          n->kind().toQualString() == std::string("aten::_transformer_encoder_layer_fwd")
              ? shadow_encoder_layer(site)
              : shadow_attention(site);
      if (result != nullptr) shadowed[n->output(0)] = result;
    } catch (const std::exception&) {
      // A shadow that cannot be built (an op this libtorch spells otherwise) leaves the fused
      // op one layer, as without shadows: what was inserted of it goes, last node first.
      while (n->prev() != before) n->prev()->destroy();
    }
  }
}

}  // namespace

// Called by the shim on the inlined forward before values are numbered. Returns, for each
// fused node's first output, the shadow's result that equals it: the shim captures that in
// its place (so that the layer's output, and what its consumers read, is the last value of
// its decomposition, and the chain of shadow values lies on the model's dataflow).
Shadowed insert_shadows(torch::jit::Graph& graph) {
  Shadowed shadowed;
  shadow_block(graph, graph.block(), shadowed);
  return shadowed;
}
