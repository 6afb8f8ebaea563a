"""The end-to-end test rule: a multi-process test against the lockstep binary."""

def e2e_test(name, deps, shm_variant = False, tags = [], **kwargs):
    """A large cc_test of `name`.cc that starts //tools:lockstep.

    Not exclusive: each test's processes bind port 0 and write under the test's own
    TEMP dir, and each launch names its shared-memory segments by a fresh nonce, so
    two of these tests (or a test and the build) may run at once. A test that needs
    the machine to itself (fixed ports, no sandbox) adds "exclusive" to `tags`.

    Args:
      name: the test; its source is name + ".cc".
      deps: its libraries.
      shm_variant: also NAME_shm_test (name without "_test" + "_shm_test"): the same
        source built with LOCKSTEP_E2E_SHM, every instance's collectives over shared
        memory instead of gloo.
      tags: the cc_test's tags.
      **kwargs: passed on to cc_test (data beyond the binary goes in `data`).
    """
    data = kwargs.pop("data", [])
    variants = [(name, [])]
    if shm_variant:
        variants.append((name[:-len("_test")] + "_shm_test", ["LOCKSTEP_E2E_SHM"]))
    for test_name, defines in variants:
        native.cc_test(
            name = test_name,
            size = "large",
            srcs = [name + ".cc"],
            data = data + ["//tools:lockstep"],
            local_defines = defines,
            tags = tags,
            deps = deps,
            **kwargs
        )
