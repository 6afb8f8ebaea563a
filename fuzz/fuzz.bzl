"""Fuzz targets: one LLVMFuzzerTestOneInput source, two ways to run it.

`lockstep_fuzzer(name, srcs, deps, corpus)` defines
  * `name`_test: a cc_test that runs the corpus and a bounded number of seeded mutations
    through fuzz_driver.cc (part of `bazel test`, a few seconds);
  * `name`: the libFuzzer binary (clang's -fsanitize=fuzzer), tagged manual, for long
    runs: `bazel run --config=fuzz //fuzz:NAME -- -max_total_time=3600 NEW_DIR $PWD/fuzz/corpus/NAME`
    (libFuzzer adds new inputs to NEW_DIR, the first directory).
"""

def lockstep_fuzzer(name, srcs, deps, corpus):
    native.cc_test(
        name = name + "_test",
        srcs = srcs + ["fuzz_driver.cc"],
        args = ["fuzz/corpus/" + name],
        data = corpus,
        deps = deps,
    )
    native.cc_binary(
        name = name,
        testonly = True,
        srcs = srcs,
        copts = ["-fsanitize=fuzzer"],
        linkopts = ["-fsanitize=fuzzer"],
        tags = ["manual"],
        deps = deps,
    )
