// Test-only: writes constrained outputs of seeded random schemas for the independent
// validator (random_schema_test.sh runs it, then testdata/validator/validate.cjs).
//
//   random_schema_cases COUNT FIRST_SEED OUT.jsonl
//
// Each line is {"seed": N, "schema": {...}, "output": "..."}. A schema that does not
// compile or an output that cannot be sampled to its end fails the run with its seed.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>

#include "grammar/matcher.h"
#include "grammar/testing_schemas.h"
#include "grammar/testing_vocabulary.h"
#include "nlohmann/json.hpp"

int main(int argc, char** argv) {
  using namespace lockstep::grammar;
  if (argc != 4) {
    std::cerr << "usage: random_schema_cases COUNT FIRST_SEED OUT.jsonl\n";
    return 2;
  }
  const int count = std::atoi(argv[1]);
  const uint32_t first_seed = static_cast<uint32_t>(std::strtoul(argv[2], nullptr, 10));
  std::ofstream out(argv[3]);
  auto vocab = MakeTestingVocabulary(4000, 1);
  int failures = 0;
  for (int i = 0; i < count; ++i) {
    const uint32_t seed = first_seed + static_cast<uint32_t>(i);
    const std::string schema = RandomSchema(seed);
    auto compiled = Compile({GrammarSpec::Kind::kJsonSchema, schema}, vocab);
    if (!compiled.ok()) {
      std::cerr << "seed " << seed << ": compile failed: " << compiled.status() << "\n  schema "
                << schema << "\n";
      ++failures;
      continue;
    }
    absl::StatusOr<std::string> output = SampleConstrained(*compiled, seed, 4000);
    if (!output.ok()) {
      std::cerr << "seed " << seed << ": " << output.status() << "\n  schema " << schema << "\n";
      ++failures;
      continue;
    }
    nlohmann::json line = {
        {"seed", seed}, {"schema", nlohmann::json::parse(schema)}, {"output", *output}};
    out << line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  }
  std::cerr << count << " schemas, " << failures << " failed\n";
  return failures == 0 ? 0 : 1;
}
