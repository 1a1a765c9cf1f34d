// XLA's asynchronous forms: async-start/-update/-done (explicit, with a
// wrapped computation, and the `X-start` sugar), all-reduce-, all-gather-,
// collective-permute- and copy-start/-done, send/recv. Each valid module
// prints back to itself, survives a proto round trip, and (where the emulator
// runs it) gives the values its synchronous twin gives; each invalid module
// is rejected with a message naming the problem.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "hlo/ir/verifier.h"
#include "hlo/proto/proto_io.h"
#include "hlo/text/text_printer.h"
#include "tests/executor_test_util.h"
#include "tools/io/module_io.h"

namespace tpuoff::runtime::testing {
namespace {

constexpr const char* kAdd = R"(
add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] add(a, b) }
)";

struct AsyncCase {
  const char* name;
  std::string text;       // the async module
  std::string sync_text;  // the same program without async ops ("" = no run)
  int devices;
  std::vector<const char*> printed;      // in the printed text
  std::vector<const char*> not_printed;  // absent from it
};

std::vector<AsyncCase> Cases() {
  return {
      {"ExplicitWrappedComputation",
       R"(HloModule m
wrapped { b = s32[4] parameter(0) c = s32[4] copy(b) u = s32[2] parameter(1)
          i = s32[] parameter(2) ROOT d = s32[4] dynamic-update-slice(c, u, i) }
ENTRY e { b = s32[4] parameter(0) u = s32[2] parameter(1) i = s32[] parameter(2)
  s = ((s32[4], s32[2], s32[]), s32[4], u32[]) async-start(b, u, i), calls=wrapped
  ROOT d = s32[4] async-done(s), calls=wrapped })",
       R"(HloModule m
ENTRY e { b = s32[4] parameter(0) u = s32[2] parameter(1) i = s32[] parameter(2)
  ROOT d = s32[4] dynamic-update-slice(b, u, i) })",
       1,
       {"async-start(%b, %u, %i), calls=%wrapped", "async-done(%s)\n", "%wrapped ("},
       {"add-start"}},
      {"SugarWithThreadAndUpdate",
       R"(HloModule m
ENTRY e { x = f32[2] parameter(0) y = f32[2] parameter(1)
  s = ((f32[2], f32[2]), f32[2], s32[]) add-start(x, y), async_execution_thread="side"
  u = ((f32[2], f32[2]), f32[2], s32[]) add-update(s)
  ROOT d = f32[2] add-done(u) })",
       R"(HloModule m
ENTRY e { x = f32[2] parameter(0) y = f32[2] parameter(1) ROOT d = f32[2] add(x, y) })",
       1,
       {"add-start(%x, %y), async_execution_thread=\"side\"", "add-update(%s)", "add-done(%u)"},
       {"calls=", "wrapped"}},
      {"SugarKeepsTheWrappedAttributes",
       std::string("HloModule m\n") + kAdd + R"(
ENTRY e { x = f32[4] parameter(0)
  s = ((f32[4]), f32[2], s32[]) reduce-scatter-start(x), replica_groups={{0,1}}, dimensions={0}, to_apply=add, metadata={op_name="sum"}
  ROOT d = f32[2] async-done(s) })",
       std::string("HloModule m\n") + kAdd + R"(
ENTRY e { x = f32[4] parameter(0)
  ROOT d = f32[2] reduce-scatter(x), replica_groups={{0,1}}, dimensions={0}, to_apply=add })",
       2,
       {"reduce-scatter-start(%x), replica_groups={{0,1}}, dimensions={0}, to_apply=%add, "
        "metadata={op_name=\"sum\"}",
        "reduce-scatter-done(%s)"},
       {"async-start", "calls="}},
      {"WrappedOpWithAnOpcodeOfItsOwnPrintsExplicitly",
       std::string("HloModule m\n") + kAdd + R"(
w { p = f32[4] parameter(0) ROOT r = f32[4] all-reduce(p), replica_groups={{0,1}}, to_apply=add }
ENTRY e { x = f32[4] parameter(0)
  s = ((f32[4]), f32[4], s32[]) async-start(x), calls=w
  ROOT d = f32[4] async-done(s) })",
       std::string("HloModule m\n") + kAdd + R"(
ENTRY e { x = f32[4] parameter(0)
  ROOT d = f32[4] all-reduce(x), replica_groups={{0,1}}, to_apply=add })",
       2, {"async-start(%x), calls=%w", "async-done(%s)"}, {"all-reduce-start"}},
      {"AllReduceStartDone",
       std::string("HloModule m\n") + kAdd + R"(
ENTRY e { x = f32[4] parameter(0)
  s = f32[4] all-reduce-start(x), replica_groups={{0,1}}, to_apply=add
  ROOT d = f32[4] all-reduce-done(s) })",
       std::string("HloModule m\n") + kAdd + R"(
ENTRY e { x = f32[4] parameter(0)
  ROOT d = f32[4] all-reduce(x), replica_groups={{0,1}}, to_apply=add })",
       2,
       {"all-reduce-start(%x), replica_groups={{0,1}}, to_apply=%add", "all-reduce-done(%s)"},
       {}},
      {"AllGatherStartDone",
       R"(HloModule m
ENTRY e { x = f32[2,3] parameter(0)
  s = (f32[2,3], f32[4,3]) all-gather-start(x), replica_groups={{0,1}}, dimensions={0}
  ROOT d = f32[4,3] all-gather-done(s) })",
       R"(HloModule m
ENTRY e { x = f32[2,3] parameter(0)
  ROOT d = f32[4,3] all-gather(x), replica_groups={{0,1}}, dimensions={0} })",
       2, {"all-gather-start(%x), replica_groups={{0,1}}, dimensions={0}"}, {}},
      {"CollectivePermuteStartDoneTwoOperands",
       R"(HloModule m
ENTRY e { x = f32[3] parameter(0) y = s32[2] parameter(1)
  s = ((f32[3], s32[2]), (f32[3], s32[2])) collective-permute-start(x, y), channel_id=3, source_target_pairs={{0,1},{1,0}}
  ROOT d = (f32[3], s32[2]) collective-permute-done(s) })",
       R"(HloModule m
ENTRY e { x = f32[3] parameter(0) y = s32[2] parameter(1)
  ROOT d = (f32[3], s32[2]) collective-permute(x, y), channel_id=3, source_target_pairs={{0,1},{1,0}} })",
       2, {"collective-permute-start(%x, %y), channel_id=3, source_target_pairs={{0,1},{1,0}}"}, {}},
      {"CopyStartDone",
       R"(HloModule m
ENTRY e { x = f32[5] parameter(0)
  s = (f32[5], f32[5], u32[]) copy-start(x)
  d = f32[5] copy-done(s)
  ROOT n = f32[5] negate(d) })",
       R"(HloModule m
ENTRY e { x = f32[5] parameter(0) d = f32[5] copy(x) ROOT n = f32[5] negate(d) })",
       1, {"copy-start(%x)", "copy-done(%s)"}, {}},
      {"SendRecvParseAndPrint",
       R"(HloModule m
ENTRY e { t = token[] after-all()
  r = (f32[2], u32[], token[]) recv(t), channel_id=5
  ROOT rd = (f32[2], token[]) recv-done(r), channel_id=5
  c = f32[2] constant({1, 2})
  s = (f32[2], u32[], token[]) send(c, t), channel_id=6
  sd = token[] send-done(s), channel_id=6 })",
       "", 1, {"recv(%t), channel_id=5", "send(%c, %t), channel_id=6", "send-done(%s)"}, {}},
      {"InPlaceCollectivePermute",
       R"(HloModule m
ENTRY e { x = f32[4,2] parameter(0) o = f32[8,2] parameter(1)
  z = s32[] constant(0) f = s32[] constant(4)
  a = (s32[], s32[]) tuple(z, z) b = (s32[], s32[]) tuple(f, z)
  ROOT p = f32[8,2] collective-permute(x, o, a, b), source_target_pairs={{0,1},{1,0}}, slice_sizes={{4,2}} })",
       "", 2, {"slice_sizes={{4,2}}"}, {}},
  };
}

std::vector<std::vector<Literal>> Inputs(const hlo::HloModule& m, int devices) {
  std::vector<std::vector<Literal>> per_device(devices);
  for (int d = 0; d < devices; ++d) {
    for (int64_t i = 0; i < m.entry()->num_parameters(); ++i) {
      Literal l(m.entry()->parameter(i)->shape());
      for (int64_t k = 0; k < l.num_elements(); ++k) {
        // Distinct per device and parameter; small enough for indices.
        l.SetFromDouble(k, l.shape().element_type() == PrimitiveType::kS32
                               ? (k + d + i) % 3
                               : 0.5 * k + 10.0 * d + 100.0 * i);
      }
      per_device[d].push_back(std::move(l));
    }
  }
  return per_device;
}

absl::StatusOr<RunResult> RunAsync(const std::string& text, int devices) {
  auto m = hlo::ParseHloText(text);
  if (!m.ok()) return m.status();
  if (absl::Status s = tools::PrepareForExecution(m->get(), "test"); !s.ok()) return s;
  return RunSpmd(**m, Inputs(**m, devices));
}

TEST(XlaAsync, PrintsBackProtoRoundTripsAndRunsLikeItsSyncTwin) {
  for (const AsyncCase& c : Cases()) {
    SCOPED_TRACE(c.name);
    auto m = Parse(c.text);
    ASSERT_NE(m, nullptr);
    const std::string printed = hlo::PrintModule(*m);
    hlo::PrintOptions brief;
    brief.print_operand_shapes = false;
    const std::string short_form = hlo::PrintModule(*m, brief);
    for (const char* s : c.printed) {
      EXPECT_NE(short_form.find(s), std::string::npos) << s << "\n" << short_form;
    }
    for (const char* s : c.not_printed) {
      EXPECT_EQ(short_form.find(s), std::string::npos) << s << "\n" << short_form;
    }
    auto again = Parse(printed);
    ASSERT_NE(again, nullptr);
    EXPECT_EQ(hlo::PrintModule(*again), printed);
    auto bytes = hlo::ModuleToProtoBytes(*m);
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    auto from_proto = hlo::ModuleFromProtoBytes(*bytes);
    ASSERT_TRUE(from_proto.ok()) << from_proto.status();
    EXPECT_EQ(hlo::PrintModule(**from_proto), printed);
    if (c.sync_text.empty()) continue;
    auto got = RunAsync(c.text, c.devices);
    auto want = RunAsync(c.sync_text, c.devices);
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_TRUE(want.ok()) << want.status();
    ASSERT_EQ(got->outputs.size(), want->outputs.size());
    for (size_t i = 0; i < want->outputs.size(); ++i) {
      ExpectNear(got->outputs[i], want->outputs[i], 0, absl::StrCat(c.name, " output ", i));
    }
  }
}

TEST(XlaAsync, ValuesOfTheLoweredPairs) {
  // all-reduce over two devices: 0.5k + 0 and 0.5k + 10 sum to k + 10.
  auto ar = RunAsync(std::string("HloModule m\n") + kAdd + R"(
ENTRY e { x = f32[3] parameter(0)
  s = f32[3] all-reduce-start(x), replica_groups={{0,1}}, to_apply=add
  ROOT d = f32[3] all-reduce-done(s) })", 2);
  ASSERT_TRUE(ar.ok()) << ar.status();
  ASSERT_EQ(ar->outputs.size(), 2u);
  for (const Literal& out : ar->outputs) ExpectNear(out, F32({3}, {10, 11, 12}), 0, "all-reduce");
  // The sugared add runs as add: [0, 0.5] + [100, 100.5].
  auto add = RunAsync(R"(HloModule m
ENTRY e { x = f32[2] parameter(0) y = f32[2] parameter(1)
  s = ((f32[2], f32[2]), f32[2], s32[]) add-start(x, y)
  ROOT d = f32[2] add-done(s) })", 1);
  ASSERT_TRUE(add.ok()) << add.status();
  ExpectNear(add->outputs[0], F32({2}, {100, 101}), 0, "add-start");
}

TEST(XlaAsync, WhatTheEmulatorCannotRunFailsNamingIt) {
  for (const AsyncCase& c : Cases()) {
    if (!c.sync_text.empty()) continue;
    SCOPED_TRACE(c.name);
    auto r = RunAsync(c.text, c.devices);
    ASSERT_FALSE(r.ok());
    const std::string msg(r.status().message());
    // (send/recv: the unused send is refused first, as a side effect the
    // emulator cannot perform, or the recv when it is reached.)
    EXPECT_TRUE(msg.find("recv") != std::string::npos ||
                msg.find("send (%s") != std::string::npos ||
                msg.find("slice_sizes") != std::string::npos)
        << msg;
  }
}

struct BadCase {
  const char* name;
  const char* text;
  const char* error;
};

TEST(XlaAsync, RejectsWhatXlaRejects) {
  const std::string wrapped = R"(HloModule m
w { p = f32[2,3] parameter(0) ROOT n = f32[2,3] negate(p) }
w2 { p2 = f32[2,3] parameter(0) ROOT n2 = f32[2,3] negate(p2) }
)";
  const BadCase bad[] = {
      {"StartWithoutOperandTuple",
       "ENTRY e { x = f32[2,3] parameter(0)\n s = (f32[2,3], f32[2,3], s32[]) async-start(x), calls=w\n"
       " ROOT d = f32[2,3] async-done(s) }",
       "((operand shapes)"},
      {"UpdateChangesTheShape",
       "ENTRY e { x = f32[2,3] parameter(0)\n s = ((f32[2,3]), f32[2,3], s32[]) async-start(x), calls=w\n"
       " u = (f32[2,3], f32[2,3], s32[]) async-update(s)\n ROOT d = f32[2,3] async-done(u) }",
       "differs from the inferred"},
      {"StartWithoutCalls",
       "ENTRY e { x = f32[2,3] parameter(0)\n s = ((f32[2,3]), f32[2,3], s32[]) async-start(x)\n"
       " ROOT d = f32[2,3] async-done(s) }",
       "requires attribute calls"},
      {"DoneCallsAnotherComputation",
       "ENTRY e { x = f32[2,3] parameter(0)\n s = ((f32[2,3]), f32[2,3], s32[]) async-start(x), calls=w\n"
       " ROOT d = f32[2,3] async-done(s), calls=w2 }",
       "differs from w of its async-start"},
      {"TwoStartsShareAComputation",
       "ENTRY e { x = f32[2,3] parameter(0)\n s = ((f32[2,3]), f32[2,3], s32[]) async-start(x), calls=w\n"
       " d = f32[2,3] async-done(s)\n t = ((f32[2,3]), f32[2,3], s32[]) async-start(x), calls=w\n"
       " ROOT e = f32[2,3] async-done(t) }",
       "already wrapped by async-start"},
      {"DoneOfANonAsyncOperand",
       "ENTRY e { x = f32[2,3] parameter(0)\n ROOT d = f32[2,3] async-done(x) }",
       "takes the async-start or async-update"},
      {"SugarDoneOfAnotherOpcode",
       "ENTRY e { x = f32[2,3] parameter(0)\n s = ((f32[2,3]), f32[2,3], s32[]) negate-start(x)\n"
       " ROOT d = f32[2,3] abs-done(s) }",
       "wraps negate, not abs"},
      {"UpdateOnAnotherThread",
       "ENTRY e { x = f32[2,3] parameter(0)\n s = ((f32[2,3]), f32[2,3], s32[]) negate-start(x)\n"
       " u = ((f32[2,3]), f32[2,3], s32[]) negate-update(s), async_execution_thread=\"t\"\n"
       " ROOT d = f32[2,3] negate-done(u) }",
       "async_execution_thread differs"},
      {"SugarStartWithoutShape",
       "ENTRY e { x = f32[2,3] parameter(0)\n s = negate-start(x)\n ROOT d = f32[2,3] negate-done(s) }",
       "needs its shape"},
      {"SugarOfAnUnknownOpcode",
       "ENTRY e { x = f32[2,3] parameter(0)\n s = ((f32[2,3]), f32[2,3], s32[]) frobnicate-start(x)\n"
       " ROOT d = f32[2,3] frobnicate-done(s) }",
       "unknown opcode 'frobnicate-start'"},
      {"ThreadOnANonAsyncOp",
       "ENTRY e { x = f32[2,3] parameter(0)\n ROOT n = f32[2,3] negate(x), async_execution_thread=\"t\" }",
       "does not apply to negate"},
  };
  for (const BadCase& b : bad) {
    SCOPED_TRACE(b.name);
    auto m = hlo::ParseHloText(wrapped + b.text, "bad.hlo");
    const absl::Status s = m.ok() ? hlo::VerifyModule(**m) : m.status();
    ASSERT_FALSE(s.ok());
    EXPECT_NE(std::string(s.message()).find(b.error), std::string::npos) << s;
  }
}

}  // namespace
}  // namespace tpuoff::runtime::testing
