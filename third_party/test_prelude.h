// The headers nearly every test source includes (the standard library's containers and
// threads, Abseil's status, strings, hash containers, mutex and time, gtest and gmock),
// precompiled once by //third_party:test_prelude_pch for `tools/lockstep test`
// (--config=test_pch in .bazelrc), which puts it in front of each *_test.cc. Only system
// headers (/usr/include): a precompiled header records the absolute path of every file it
// read, and those stay valid outside the sandbox the header was compiled in. A test
// source still includes what it uses: without the config it compiles without this file.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
