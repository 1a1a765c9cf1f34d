// Annotations XLA prints that do not change what a module computes: each
// survives parse -> print -> parse and text -> proto -> text, and malformed
// ones are rejected as XLA's parser rejects them.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "hlo/ir/verifier.h"
#include "hlo/proto/proto_io.h"
#include "hlo/text/text_parser.h"
#include "hlo/text/text_printer.h"

namespace tpuoff::hlo {
namespace {

struct KeptCase {
  const char* name;
  std::string text;
  std::vector<const char*> printed;  // each must be in the printed module
};

std::vector<KeptCase> Kept() {
  return {
      {"ResultAccuracyMode",
       "HloModule m\nENTRY e { x = f32[3] parameter(0)\n"
       "  ROOT y = f32[3] exponential(x), result_accuracy={mode=highest} }",
       {"exponential(f32[3]{0} %x), result_accuracy={mode=highest}"}},
      {"ResultAccuracyTolerance",
       "HloModule m\nENTRY e { x = f32[3] parameter(0)\n"
       "  ROOT y = f32[3] log(x), result_accuracy={tolerance={ulps=4, rtol=0.25}} }",
       {"result_accuracy={tolerance={atol=0,rtol=0.25,ulps=4}}"}},
      {"DefaultModeIsNotPrinted",
       "HloModule m\nENTRY e { x = f32[3] parameter(0)\n"
       "  ROOT y = f32[3] tanh(x), result_accuracy={mode=default} }",
       {"tanh(f32[3]{0} %x)\n"}},
      {"Statistics",
       "HloModule m\nENTRY e { ROOT c = s32[] constant(7), statistics={visualizing_index=2,"
       "hbm-share=12.5,flops=3} }",
       {"statistics={visualizing_index=2,hbm-share=12.5,flops=3}"}},
      {"ParameterReplication",
       "HloModule m\nENTRY e { a = f32[] parameter(0), parameter_replication={false}\n"
       "  b = (f32[2], (s32[3], f32[])) parameter(1), parameter_replication={true,false,true}\n"
       "  ROOT t = (f32[], (f32[2], (s32[3], f32[]))) tuple(a, b) }",
       {"parameter(0), parameter_replication={false}",
        "parameter(1), parameter_replication={true,false,true}"}},
      {"CompositeCall",
       "HloModule m\nsq { x = f32[2] parameter(0) ROOT m = f32[2] multiply(x, x) }\n"
       "ENTRY e { p = f32[2] parameter(0)\n"
       "  ROOT c = f32[2] call(p), to_apply=sq, is_composite=true, "
       "frontend_attributes={composite.name=\"my.square\",composite.version=\"2\"} }",
       {"to_apply=%sq, is_composite=true", "composite.name=\"my.square\""}},
      {"ScheduledModuleWithDonors",
       "HloModule m, is_scheduled=true, buffer_donor={ (0, {}), (1, {1}) }\n"
       "ENTRY e { a = f32[2] parameter(0) b = (f32[2], f32[2]) parameter(1)\n"
       "  g = f32[2] get-tuple-element(b), index=1 ROOT s = f32[2] add(a, g) }",
       {"HloModule m, is_scheduled=true, buffer_donor={ (0, {}), (1, {1}) }"}},
      {"MetadataAndStackFrames",
       "HloModule m\n\nFileNames\n1 \"model.py\"\n2 \"layers.py\"\n\nFunctionNames\n1 \"main\"\n"
       "2 \"dense\"\n\nFileLocations\n1 {file_name_id=1 function_name_id=1 line=10 end_line=10 "
       "column=4 end_column=20}\n2 {file_name_id=2 function_name_id=2 line=7 end_line=9 column=1 "
       "end_column=3}\n\nStackFrames\n1 {file_location_id=1 parent_frame_id=0}\n"
       "2 {file_location_id=2 parent_frame_id=1}\n\n"
       "ENTRY e { x = f32[2] parameter(0)\n  ROOT n = f32[2] negate(x), metadata={op_type=\"neg\" "
       "op_name=\"jit(f)/neg\" source_file=\"layers.py\" source_line=7 source_end_line=9 "
       "source_column=1 source_end_column=3 profile_type={1,2} deduplicated_name=\"n0\" "
       "scheduling_name=\"s\" stack_frame_id=2} }",
       {"source_line=7 source_end_line=9 source_column=1 source_end_column=3 "
        "profile_type={1,2} deduplicated_name=\"n0\" scheduling_name=\"s\" stack_frame_id=2}",
        "2 {file_location_id=2 parent_frame_id=1}", "2 \"layers.py\"",
        "1 {file_name_id=1 function_name_id=1 line=10 end_line=10 column=4 end_column=20}"}},
  };
}

TEST(XlaAnnotations, KeptThroughTextAndProto) {
  for (const KeptCase& c : Kept()) {
    SCOPED_TRACE(c.name);
    auto m = ParseHloText(c.text);
    ASSERT_TRUE(m.ok()) << m.status();
    ASSERT_TRUE(VerifyModule(**m).ok());
    const std::string printed = PrintModule(**m);
    for (const char* s : c.printed) EXPECT_NE(printed.find(s), std::string::npos) << s << "\n" << printed;
    auto again = ParseHloText(printed);
    ASSERT_TRUE(again.ok()) << again.status() << "\n" << printed;
    EXPECT_EQ(PrintModule(**again), printed);
    auto bytes = ModuleToProtoBytes(**m);
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    auto from_proto = ModuleFromProtoBytes(*bytes);
    ASSERT_TRUE(from_proto.ok()) << from_proto.status();
    EXPECT_EQ(PrintModule(**from_proto), printed);
  }
}

// As XLA: a stack_frame_id without its frame in the index is dropped.
TEST(XlaAnnotations, StackFrameIdWithoutAFrameIsDropped) {
  auto m = ParseHloText(
      "HloModule m\nENTRY e { ROOT c = s32[] constant(1), metadata={op_name=\"a\" "
      "stack_frame_id=3} }");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ((*m)->entry()->root()->metadata().stack_frame_id, 0);
  EXPECT_NE(PrintModule(**m).find("metadata={op_name=\"a\"}"), std::string::npos);
}

struct BadCase {
  const char* name;
  const char* text;
  const char* error;
};

TEST(XlaAnnotations, MalformedOnesAreRejected) {
  const BadCase bad[] = {
      {"UnknownMode", "ENTRY e { x = f32[] parameter(0)\n"
                      " ROOT y = f32[] exponential(x), result_accuracy={mode=high} }",
       "default or highest"},
      {"BareNumber", "ENTRY e { x = f32[] parameter(0)\n"
                     " ROOT y = f32[] exponential(x), result_accuracy={0.5} }",
       "expected mode= or tolerance="},
      {"UnknownAccuracyField", "ENTRY e { x = f32[] parameter(0)\n"
                               " ROOT y = f32[] exponential(x), result_accuracy={foo=1} }",
       "invalid result_accuracy field foo"},
      {"UnknownToleranceField",
       "ENTRY e { x = f32[] parameter(0)\n"
       " ROOT y = f32[] sqrt(x), result_accuracy={tolerance={eps=1}} }",
       "invalid tolerance field eps"},
      {"NegativeTolerance",
       "ENTRY e { x = f32[] parameter(0)\n"
       " ROOT y = f32[] sqrt(x), result_accuracy={tolerance={atol=-1}} }",
       "finite and >= 0"},
      {"AccuracyOnANonTranscendentalOp",
       "ENTRY e { x = s32[4] parameter(0)\n"
       " ROOT y = s8[4,4] bitcast-convert(x), result_accuracy={mode=highest} }",
       "does not apply to bitcast-convert"},
      {"ReplicationNotABool",
       "ENTRY e { ROOT x = f32[] parameter(0), parameter_replication={maybe} }",
       "expected true or false"},
      {"ReplicationCountDiffers",
       "ENTRY e { ROOT x = (f32[], f32[]) parameter(0), parameter_replication={true} }",
       "leaf buffers"},
      {"ReplicationOnANonParameter",
       "ENTRY e { x = f32[] parameter(0)\n ROOT n = f32[] negate(x), parameter_replication={true} }",
       "does not apply to negate"},
      {"CompositeOnANonCall",
       "ENTRY e { x = f32[] parameter(0)\n ROOT n = f32[] negate(x), is_composite=true }",
       "does not apply to negate"},
      {"StatisticsWithoutIndex",
       "ENTRY e { ROOT c = s32[] constant(1), statistics={stat-1=3} }",
       "visualizing_index"},
  };
  const BadCase bad_header[] = {
      {"DonorIndexNotANumber", "HloModule m, buffer_donor={ (0, {0, a}) }\n", "expected"},
      {"DonorParameterNotANumber", "HloModule m, buffer_donor={ (zero, {0}) }\n", "expected"},
      {"DonorOfAMissingBuffer", "HloModule m, buffer_donor={ (0, {2}) }\n",
       "missing parameter buffer"},
      {"FrameTablesOutOfOrder",
       "HloModule m\n\nFileNames\n2 \"a.py\"\n\n", "ids must count up from 1"},
      {"FrameLocationOutOfRange",
       "HloModule m\n\nFileNames\n1 \"a.py\"\n\nFunctionNames\n1 \"f\"\n\nFileLocations\n"
       "1 {file_name_id=2 function_name_id=1 line=1 end_line=1 column=1 end_column=1}\n\n",
       "out of range"},
  };
  for (const BadCase& b : bad) {
    SCOPED_TRACE(b.name);
    auto m = ParseHloText(std::string("HloModule m\n") + b.text, "bad.hlo");
    ASSERT_FALSE(m.ok());
    EXPECT_NE(std::string(m.status().message()).find(b.error), std::string::npos) << m.status();
  }
  for (const BadCase& b : bad_header) {
    SCOPED_TRACE(b.name);
    auto m = ParseHloText(std::string(b.text) +
                              "ENTRY e { p = (f32[], f32[]) parameter(0)\n"
                              "  ROOT g = f32[] get-tuple-element(p), index=0 }",
                          "bad.hlo");
    ASSERT_FALSE(m.ok());
    EXPECT_NE(std::string(m.status().message()).find(b.error), std::string::npos) << m.status();
  }
}

}  // namespace
}  // namespace tpuoff::hlo
