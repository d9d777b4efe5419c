// align-check's interpreter for torch.export programs (the graph of a .pt2 archive).
//
// An exported program is a flat list of calls to ATen operator overloads
// (`torch.ops.aten.conv2d.default`) on named values. PyTorch's own `ep.module()(*args)` runs
// it by calling each overload in turn, which goes through the dispatcher to the kernel
// registered for it. This file does the same: each call is resolved once, at load, to the
// dispatcher's handle for exactly that overload (`c10::Dispatcher::findSchema`) and run with
// `callBoxed`, so the kernels are the ones Python runs; no TorchScript graph and no overload
// matching by types is involved. After each call the tensors the Rust side asked for are
// handed to the run's sink, as the TorchScript shim's observe nodes do.
//
// The Rust side reads the archive (src/torch/exported/) and hands this file the program as
// plain text, one instruction per line (see `parse`), with the archive's weights and
// constants as tensors. Nothing here parses JSON or knows about the archive's layout.
//
// No C++ exception may cross into Rust: every entry point catches everything and returns the
// message through `err` (a malloc'ed string the caller frees with ac_free_string).

#include <ATen/ATen.h>
#include <ATen/ScalarOps.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include "ac_args.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using Sink = void (*)(void* ctx, size_t id, void* tensor);

// A value of the program text: a constant, a slot holding a value computed earlier, or a
// list of those. Lists carry their element kind so that the IValue is the typed list the
// operator's schema asks for (`int[]`, `Tensor[]`, `Tensor?[]`).
struct Expr {
  enum Kind { None, Slot, Int, Float, Bool, Str, Device, List } kind = None;
  int64_t i = 0;
  double f = 0;
  std::string s;
  char element = 0;
  std::vector<Expr> items;
};

// What becomes of one of an operator's returns: stored in a slot, ignored, or (a `Tensor[]`
// return) unpacked into one slot per element.
struct Bind {
  int64_t slot = -1;
  bool list = false;
  std::vector<int64_t> slots;
};

struct Call {
  std::string name;
  // Set for Python arithmetic on symbolic sizes (`_operator.mul`), which has no operator: the
  // positional arguments are in `sym_args`, and `op` is unused.
  std::string sym;
  std::vector<Expr> sym_args;
  c10::OperatorHandle op;
  // One expression per schema argument; null where the schema's default is used.
  std::vector<std::unique_ptr<Expr>> args;
  std::vector<Bind> returns;
  // (slot, capture id): tensors handed to the sink after the call.
  std::vector<std::pair<int64_t, int64_t>> captures;
  // Slots no later call reads: released after the call so that memory stays at the live set.
  std::vector<int64_t> releases;
};

struct Program {
  size_t n_slots = 0;
  // (slot, capture id or -1) per user input, in order.
  std::vector<std::pair<int64_t, int64_t>> inputs;
  // (slot, index into `constants`).
  std::vector<std::pair<int64_t, size_t>> bindings;
  std::vector<at::Tensor> constants;
  std::vector<Call> calls;
  std::vector<int64_t> outputs;
  std::vector<std::string> output_names;
};

std::string unhex(const std::string& hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return out;
}

int64_t slot_number(const std::string& token, size_t n_slots) {
  int64_t slot = std::stoll(token);
  if (slot < 0 || static_cast<size_t>(slot) >= n_slots) {
    throw std::runtime_error("internal error: the program names slot " + token);
  }
  return slot;
}

// One value token: `n` None, `t<slot>`, `i<int>`, `f<float>`, `b0`/`b1`, `s<hex>` a string,
// `v<hex>` a device, `L<kind><count>` a list whose elements are the next <count> tokens.
Expr parse_expr(std::istringstream& in, size_t n_slots) {
  std::string token;
  if (!(in >> token) || token.empty()) throw std::runtime_error("internal error: value missing");
  Expr e;
  const std::string rest = token.substr(1);
  switch (token[0]) {
    case 'n': e.kind = Expr::None; break;
    case 't': e.kind = Expr::Slot; e.i = slot_number(rest, n_slots); break;
    case 'i': e.kind = Expr::Int; e.i = std::stoll(rest); break;
    case 'f': e.kind = Expr::Float; e.f = std::strtod(rest.c_str(), nullptr); break;
    case 'b': e.kind = Expr::Bool; e.i = rest == "1"; break;
    case 's': e.kind = Expr::Str; e.s = unhex(rest); break;
    case 'v': e.kind = Expr::Device; e.s = unhex(rest); break;
    case 'L': {
      e.kind = Expr::List;
      e.element = rest.empty() ? 'i' : rest[0];
      size_t count = std::stoul(rest.substr(1));
      for (size_t k = 0; k < count; ++k) e.items.push_back(parse_expr(in, n_slots));
      break;
    }
    default: throw std::runtime_error("internal error: unknown value token " + token);
  }
  return e;
}

c10::OperatorHandle find_op(const std::string& name, const std::string& overload) {
  auto op = c10::Dispatcher::singleton().findSchema({name, overload == "default" ? "" : overload});
  if (!op) {
    // The TorchScript loader's words for the same problem, so that the Rust side treats both
    // alike (a custom op whose library --torch-ops loads).
    throw std::runtime_error("Unknown builtin op: " + name + ". (overload " + overload + ")");
  }
  return *op;
}

// `call <name> <overload> <n args>`, then one line per argument (`<hex name> <value>`), then
// `ret` with one token per return (`o<slot>`, `x`, or `L<count>` and that many of them),
// then optional `cap <slot> <id>` and `rel <slot>` lines, then `end`.
void parse_tail(Call& call, std::istream& lines, size_t n_slots);

Call parse_call(std::istringstream& head, std::istream& lines, size_t n_slots) {
  std::string name, overload;
  size_t n_args = 0;
  head >> name >> overload >> n_args;
  Call call{name + "." + overload, "", {}, find_op(name, overload), {}, {}, {}, {}};
  const auto& schema = call.op.schema();
  call.args.resize(schema.arguments().size());
  std::string line;
  for (size_t k = 0; k < n_args && std::getline(lines, line); ++k) {
    std::istringstream in(line);
    std::string hex;
    in >> hex;
    const std::string arg = unhex(hex);
    auto index = schema.argumentIndexWithName(arg);
    if (!index) {
      throw std::runtime_error(call.name + " has no argument '" + arg +
                               "' in this libtorch: the archive was written by another version");
    }
    call.args[*index] = std::make_unique<Expr>(parse_expr(in, n_slots));
  }
  parse_tail(call, lines, n_slots);
  return call;
}

// `sym <python name> <n args>`, then one positional value per line, then the tail as for
// `call`.
Call parse_sym(std::istringstream& head, std::istream& lines, size_t n_slots) {
  std::string name;
  size_t n_args = 0;
  head >> name >> n_args;
  // An OperatorHandle cannot be empty: any registered one fills the slot `sym` leaves unused.
  Call call{name, name, {}, find_op("aten::sym_size", "int"), {}, {}, {}, {}};
  std::string line;
  for (size_t k = 0; k < n_args && std::getline(lines, line); ++k) {
    std::istringstream in(line);
    call.sym_args.push_back(parse_expr(in, n_slots));
  }
  parse_tail(call, lines, n_slots);
  return call;
}

// The `ret`, `cap` and `rel` lines of a call, up to its `end`.
void parse_tail(Call& call, std::istream& lines, size_t n_slots) {
  std::string line;
  while (std::getline(lines, line) && line != "end") {
    std::istringstream in(line);
    std::string word;
    in >> word;
    if (word == "ret") {
      std::string token;
      while (in >> token) {
        Bind bind;
        if (token[0] == 'o') bind.slot = slot_number(token.substr(1), n_slots);
        if (token[0] == 'L') {
          bind.list = true;
          size_t count = std::stoul(token.substr(1));
          for (size_t k = 0; k < count && in >> token; ++k) {
            bind.slots.push_back(token[0] == 'o' ? slot_number(token.substr(1), n_slots) : -1);
          }
        }
        call.returns.push_back(bind);
      }
    } else if (word == "cap") {
      int64_t slot = 0, id = 0;
      in >> slot >> id;
      call.captures.emplace_back(slot_number(std::to_string(slot), n_slots), id);
    } else if (word == "rel") {
      int64_t slot = 0;
      in >> slot;
      call.releases.push_back(slot_number(std::to_string(slot), n_slots));
    }
  }
}

// The program text: `slots <n>`, then `input <slot> <id>`, `bind <slot> <constant>`,
// `call ...` blocks (parse_call) and `out <slot> <hex name>` lines, in execution order.
std::unique_ptr<Program> parse(const std::string& text, std::vector<at::Tensor> constants) {
  auto program = std::make_unique<Program>();
  program->constants = std::move(constants);
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream in(line);
    std::string word;
    in >> word;
    if (word == "slots") {
      in >> program->n_slots;
    } else if (word == "input") {
      int64_t slot = 0, id = -1;
      in >> slot >> id;
      program->inputs.emplace_back(slot_number(std::to_string(slot), program->n_slots), id);
    } else if (word == "bind") {
      int64_t slot = 0;
      size_t index = 0;
      in >> slot >> index;
      if (index >= program->constants.size()) {
        throw std::runtime_error("internal error: the program binds a missing constant");
      }
      program->bindings.emplace_back(slot_number(std::to_string(slot), program->n_slots), index);
    } else if (word == "call") {
      program->calls.push_back(parse_call(in, lines, program->n_slots));
    } else if (word == "sym") {
      program->calls.push_back(parse_sym(in, lines, program->n_slots));
    } else if (word == "out") {
      std::string slot, hex;
      in >> slot >> hex;
      program->outputs.push_back(slot_number(slot, program->n_slots));
      program->output_names.push_back(unhex(hex));
    }
  }
  return program;
}

c10::IValue evaluate(const Expr& e, const std::vector<c10::IValue>& slots) {
  switch (e.kind) {
    case Expr::None: return c10::IValue();
    case Expr::Slot: return slots[e.i];
    case Expr::Int: return e.i;
    case Expr::Float: return e.f;
    case Expr::Bool: return e.i != 0;
    case Expr::Str: return e.s;
    case Expr::Device: return c10::Device(e.s);
    case Expr::List: break;
  }
  switch (e.element) {
    case 'f': {
      std::vector<double> out;
      for (const auto& item : e.items) out.push_back(evaluate(item, slots).toDouble());
      return out;
    }
    case 'b': {
      c10::List<bool> out;
      for (const auto& item : e.items) out.push_back(evaluate(item, slots).toBool());
      return out;
    }
    case 't': {
      std::vector<at::Tensor> out;
      for (const auto& item : e.items) out.push_back(evaluate(item, slots).toTensor());
      return out;
    }
    case 'o': {
      c10::List<std::optional<at::Tensor>> out;
      for (const auto& item : e.items) {
        c10::IValue v = evaluate(item, slots);
        out.push_back(v.isNone() ? std::optional<at::Tensor>() : v.toTensor());
      }
      return out;
    }
    case 's': {
      std::vector<std::string> out;
      for (const auto& item : e.items) out.push_back(item.s);
      return out;
    }
    default: {
      // Integers, and symbolic sizes computed earlier in the program (slots holding ints).
      std::vector<int64_t> out;
      for (const auto& item : e.items) out.push_back(evaluate(item, slots).toInt());
      return out;
    }
  }
}

// What Python's argument parser does before `ep.module()` reaches the dispatcher, done here
// too so that the kernels see the same values: a number passed where the schema takes a
// Tensor (`mul.Tensor(x, 0.125)`) becomes a 0-d "wrapped number" tensor, which type promotion
// treats as a Python scalar (it does not widen the other operand); an int where the schema
// takes a float becomes a float.
c10::IValue coerce(const c10::Argument& arg, c10::IValue v) {
  c10::TypePtr type = arg.type();
  if (auto optional = type->cast<c10::OptionalType>()) type = optional->getElementType();
  const auto kind = type->kind();
  if (kind == c10::TypeKind::TensorType && (v.isDouble() || v.isInt() || v.isBool())) {
    at::Tensor t = v.isDouble() ? at::scalar_to_tensor(v.toDouble())
                   : v.isInt()  ? at::scalar_to_tensor(v.toInt())
                                : at::scalar_to_tensor(v.toBool());
    t.unsafeGetTensorImpl()->set_wrapped_number(true);
    return t;
  }
  if (kind == c10::TypeKind::FloatType && v.isInt()) return static_cast<double>(v.toInt());
  return v;
}

// Python's integer floor division and modulo (rounding toward negative infinity), which
// symbolic sizes follow.
int64_t floor_div(int64_t a, int64_t b) {
  if (b == 0) throw std::runtime_error("integer division by zero in a symbolic size");
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

// One Python arithmetic node on symbolic sizes (ints, floats, bools), as Python computes it.
c10::IValue run_sym(const std::string& op, const std::vector<c10::IValue>& a) {
  auto arg = [&](size_t k) -> const c10::IValue& {
    if (k >= a.size()) throw std::runtime_error(op + ": too few arguments");
    return a[k];
  };
  auto real = [](const c10::IValue& v) {
    return v.isDouble() ? v.toDouble() : v.isBool() ? double(v.toBool()) : double(v.toInt());
  };
  const bool ints = std::all_of(a.begin(), a.end(), [](const c10::IValue& v) {
    return v.isInt() || v.isBool();
  });
  auto whole = [](const c10::IValue& v) { return v.isBool() ? int64_t(v.toBool()) : v.toInt(); };
  if (op == "_operator.neg") return ints ? c10::IValue(-whole(arg(0))) : c10::IValue(-real(arg(0)));
  if (op == "torch.sym_not") return !arg(0).toBool();
  if (op == "torch.sym_float") return real(arg(0));
  if (op == "torch.sym_int" || op == "math.trunc") return static_cast<int64_t>(real(arg(0)));
  if (op == "math.ceil") return static_cast<int64_t>(std::ceil(real(arg(0))));
  if (op == "math.floor") return static_cast<int64_t>(std::floor(real(arg(0))));
  const c10::IValue& x = arg(0);
  const c10::IValue& y = arg(1);
  if (op == "_operator.eq") return real(x) == real(y);
  if (op == "_operator.ne") return real(x) != real(y);
  if (op == "_operator.lt") return real(x) < real(y);
  if (op == "_operator.le") return real(x) <= real(y);
  if (op == "_operator.gt") return real(x) > real(y);
  if (op == "_operator.ge") return real(x) >= real(y);
  if (op == "_operator.and_") return whole(x) & whole(y);
  if (op == "_operator.or_") return whole(x) | whole(y);
  if (op == "_operator.truediv") return real(x) / real(y);
  if (ints) {
    int64_t i = whole(x), j = whole(y);
    if (op == "_operator.add") return i + j;
    if (op == "_operator.sub") return i - j;
    if (op == "_operator.mul") return i * j;
    if (op == "_operator.floordiv") return floor_div(i, j);
    if (op == "_operator.mod") return i - floor_div(i, j) * j;
    if (op == "torch.sym_max") return std::max(i, j);
    if (op == "torch.sym_min") return std::min(i, j);
  }
  double p = real(x), q = real(y);
  if (op == "_operator.add") return p + q;
  if (op == "_operator.sub") return p - q;
  if (op == "_operator.mul") return p * q;
  if (op == "_operator.floordiv") return std::floor(p / q);
  if (op == "_operator.pow") return std::pow(p, q);
  if (op == "torch.sym_max") return std::max(p, q);
  if (op == "torch.sym_min") return std::min(p, q);
  throw std::runtime_error("the symbolic-size operation " + op + " is not one this reader runs");
}

void run_call(const Call& call, std::vector<c10::IValue>& slots, Sink sink, void* ctx) {
  if (!call.sym.empty()) {
    std::vector<c10::IValue> values;
    for (const auto& e : call.sym_args) values.push_back(evaluate(e, slots));
    c10::IValue result = run_sym(call.sym, values);
    if (!call.returns.empty() && call.returns[0].slot >= 0) slots[call.returns[0].slot] = result;
    for (int64_t slot : call.releases) slots[slot] = c10::IValue();
    return;
  }
  const auto& schema = call.op.schema();
  std::vector<c10::IValue> stack;
  stack.reserve(call.args.size());
  for (size_t k = 0; k < call.args.size(); ++k) {
    if (call.args[k]) {
      stack.push_back(coerce(schema.arguments()[k], evaluate(*call.args[k], slots)));
    } else if (schema.arguments()[k].default_value()) {
      stack.push_back(*schema.arguments()[k].default_value());
    } else {
      throw std::runtime_error(call.name + ": argument '" + schema.arguments()[k].name() +
                               "' is missing from the archive");
    }
  }
  call.op.callBoxed(stack);
  for (size_t k = 0; k < call.returns.size() && k < stack.size(); ++k) {
    const Bind& bind = call.returns[k];
    if (bind.list) {
      auto list = stack[k].toList();
      for (size_t e = 0; e < bind.slots.size() && e < list.size(); ++e) {
        if (bind.slots[e] >= 0) slots[bind.slots[e]] = list.get(e);
      }
    } else if (bind.slot >= 0) {
      slots[bind.slot] = std::move(stack[k]);
    }
  }
  if (sink != nullptr) {
    for (const auto& [slot, id] : call.captures) {
      const c10::IValue& v = slots[slot];
      bool defined = v.isTensor() && v.toTensor().defined();
      sink(ctx, static_cast<size_t>(id), defined ? new at::Tensor(v.toTensor()) : nullptr);
    }
  }
  for (int64_t slot : call.releases) slots[slot] = c10::IValue();
}

// Runs the program on `inputs`; with a sink, every captured tensor is handed over as soon as
// it is computed. Returns the program's outputs.
std::vector<at::Tensor> run(const Program& program, const std::vector<at::Tensor>& inputs,
                            Sink sink, void* ctx) {
  if (inputs.size() != program.inputs.size()) {
    throw std::runtime_error("the exported program takes " +
                             std::to_string(program.inputs.size()) + " tensor input(s), " +
                             std::to_string(inputs.size()) + " were given");
  }
  at::NoGradGuard no_grad;
  std::vector<c10::IValue> slots(program.n_slots);
  for (const auto& [slot, index] : program.bindings) slots[slot] = program.constants[index];
  for (size_t k = 0; k < inputs.size(); ++k) {
    const auto& [slot, id] = program.inputs[k];
    slots[slot] = inputs[k];
    if (sink != nullptr && id >= 0) sink(ctx, static_cast<size_t>(id), new at::Tensor(inputs[k]));
  }
  for (const Call& call : program.calls) {
    try {
      run_call(call, slots, sink, ctx);
    } catch (const std::exception& e) {
      std::string what = e.what();
      throw std::runtime_error(call.name + ": " + what);
    }
  }
  std::vector<at::Tensor> out;
  for (int64_t slot : program.outputs) {
    const c10::IValue& v = slots[slot];
    if (v.isTensor()) out.push_back(v.toTensor());
    else if (v.isInt()) out.push_back(at::scalar_tensor(v.toInt(), at::kLong));
    else if (v.isDouble()) out.push_back(at::scalar_tensor(v.toDouble(), at::kDouble));
    else if (v.isBool()) out.push_back(at::scalar_tensor(v.toBool(), at::kBool));
    else throw std::runtime_error("the program returns a value that is not a tensor");
  }
  return out;
}

char* dup_string(const std::string& s) {
  char* out = static_cast<char*>(std::malloc(s.size() + 1));
  if (out != nullptr) std::memcpy(out, s.c_str(), s.size() + 1);
  return out;
}

// libtorch's messages carry a C++ backtrace after the first lines; the user needs the message.
void set_error(char** err, const char* what) {
  std::string msg(what == nullptr ? "unknown error" : what);
  for (const char* marker : {"\nException raised from", "\nframe #"}) {
    auto pos = msg.find(marker);
    if (pos != std::string::npos) msg = msg.substr(0, pos);
  }
  if (err != nullptr) *err = dup_string(msg);
}

// forward's arguments: `AcArgs` (ac_args.h); an exported program takes tensors only.

std::vector<at::Tensor> tensor_inputs(const AcArgs& args) {
  for (size_t k = 0; k < args.n_codes; ++k) {
    if (args.codes[k] != 0) {
      throw std::runtime_error("an exported program's inputs must all be tensors here");
    }
  }
  std::vector<at::Tensor> out;
  for (size_t k = 0; k < args.n_tensors; ++k) {
    out.push_back(*static_cast<const at::Tensor*>(args.tensors[k]));
  }
  return out;
}

void** finish(const Program& program, const std::vector<at::Tensor>& out, size_t* n_outputs,
              char** names) {
  std::string joined;
  for (size_t i = 0; i < program.output_names.size(); ++i) {
    joined += (i ? "\n" : "") + program.output_names[i];
  }
  *names = dup_string(joined);
  *n_outputs = out.size();
  auto** arr = static_cast<at::Tensor**>(std::malloc(sizeof(at::Tensor*) * (out.size() + 1)));
  for (size_t i = 0; i < out.size(); ++i) arr[i] = new at::Tensor(out[i]);
  arr[out.size()] = nullptr;
  return reinterpret_cast<void**>(arr);
}

}  // namespace

extern "C" {

// Parses the program text and resolves every operator; `constants` are heap at::Tensor
// pointers (borrowed: copied here). Returns null and sets `err` on failure.
void* ac_program_load(const char* text, void* const* constants, size_t n_constants, char** err) {
  try {
    std::vector<at::Tensor> owned;
    for (size_t k = 0; k < n_constants; ++k) {
      owned.push_back(*static_cast<const at::Tensor*>(constants[k]));
    }
    return parse(text, std::move(owned)).release();
  } catch (const std::exception& e) {
    set_error(err, e.what());
  } catch (...) {
    set_error(err, "unknown C++ exception while loading the exported program");
  }
  return nullptr;
}

void ac_program_free(void* program) { delete static_cast<Program*>(program); }

// Runs the program; with a non-null `sink`, each captured tensor is handed to it (the sink owns
// it). Returns the outputs as ac_capture does (a null-terminated array, names one per line).
void** ac_program_run(void* handle, const AcArgs* args, Sink sink, void* ctx, size_t* n_outputs,
                      char** names, char** err) {
  try {
    const auto& program = *static_cast<Program*>(handle);
    std::vector<at::Tensor> out = run(program, tensor_inputs(*args), sink, ctx);
    return finish(program, out, n_outputs, names);
  } catch (const std::exception& e) {
    set_error(err, e.what());
  } catch (...) {
    set_error(err, "unknown C++ exception while running the exported program");
  }
  return nullptr;
}

// Casts the floating-point weights and constants to float64 (the rounding reference).
int ac_program_to_float64(void* handle, char** err) {
  try {
    auto& program = *static_cast<Program*>(handle);
    for (auto& t : program.constants) {
      if (t.is_floating_point()) t = t.to(at::kDouble);
    }
    return 0;
  } catch (const std::exception& e) {
    set_error(err, e.what());
  }
  return 1;
}

// Reads the archive's sample inputs (`data/sample_inputs/<model>.pt`: what torch.save writes
// for the `(args, kwargs)` pair given to torch.export.export) with libtorch's own unpickler.
// Returns the positional tensors, then the keyword ones in the order `keywords` lists them
// ('\n'-separated: the program's order, from its in_spec), as ac_capture returns its
// outputs (a null-terminated array of heap tensors), or null with `err` saying what the file
// holds that cannot be fed.
void** ac_pickled_sample_inputs(const char* data, size_t len, const char* keywords, size_t* n,
                                char** err) {
  try {
    c10::IValue value = torch::jit::pickle_load(std::vector<char>(data, data + len));
    if (!value.isTuple() || value.toTupleRef().elements().size() != 2) {
      throw std::runtime_error("they are not the (args, kwargs) pair torch.export.save writes");
    }
    const auto& pair = value.toTupleRef().elements();
    if (!pair[0].isTuple()) throw std::runtime_error("their positional arguments are not a tuple");
    std::vector<at::Tensor> out;
    auto take = [&out](const c10::IValue& arg, const std::string& what) {
      if (!arg.isTensor()) {
        throw std::runtime_error(what + " is a " + arg.tagKind() + ", not a tensor");
      }
      out.push_back(arg.toTensor());
    };
    for (const auto& arg : pair[0].toTupleRef().elements()) {
      take(arg, "argument " + std::to_string(out.size()));
    }
    std::vector<std::string> order;
    std::stringstream names(keywords ? keywords : "");
    for (std::string name; std::getline(names, name, '\n');) {
      if (!name.empty()) order.push_back(name);
    }
    if (pair[1].isGenericDict()) {
      auto given = pair[1].toGenericDict();
      if (given.size() != order.size()) {
        throw std::runtime_error("they pass " + std::to_string(given.size()) +
                                 " keyword argument(s) where the program takes " +
                                 std::to_string(order.size()));
      }
      for (const auto& name : order) {
        auto found = given.find(name);
        if (found == given.end()) {
          throw std::runtime_error("they do not pass the keyword argument `" + name + "`");
        }
        take(found->value(), "keyword argument `" + name + "`");
      }
    }
    *n = out.size();
    auto** arr = static_cast<at::Tensor**>(std::malloc(sizeof(at::Tensor*) * (out.size() + 1)));
    for (size_t i = 0; i < out.size(); ++i) arr[i] = new at::Tensor(out[i]);
    arr[out.size()] = nullptr;
    return reinterpret_cast<void**>(arr);
  } catch (const std::exception& e) {
    set_error(err, e.what());
  } catch (...) {
    set_error(err, "unknown C++ exception while reading the sample inputs");
  }
  return nullptr;
}

}  // extern "C"
