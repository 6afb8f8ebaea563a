"""C++ and gRPC code generation from .proto files with the system protoc.

Debian ships no gRPC Bazel rules, so a genrule calls /usr/bin/protoc with
/usr/bin/grpc_cpp_plugin. Protos import each other by workspace-relative path;
well-known types resolve from /usr/include. Works only from the main repository.
"""

def cc_grpc_proto_library(name, srcs, proto_deps = [], deps = [], grpc = True, visibility = None):
    """Generates `<src>.pb.{h,cc}` (and `.grpc.pb.{h,cc}` with grpc) and a cc_library.

    Args:
      name: the cc_library target; C++ includes "pkg/file.pb.h".
      srcs: .proto files in this package.
      proto_deps: .proto files imported by srcs (other packages' `exports_files`).
      deps: cc_library targets generated from proto_deps.
      grpc: also generate gRPC service stubs.
      visibility: visibility of the cc_library.
    """
    outs = []
    for src in srcs:
        base = src[:-len(".proto")]
        outs += [base + ".pb.h", base + ".pb.cc"]
        if grpc:
            outs += [base + ".grpc.pb.h", base + ".grpc.pb.cc"]
    cmd = "/usr/bin/protoc -I. -I/usr/include --cpp_out=$(GENDIR)"
    if grpc:
        cmd += " --grpc_out=$(GENDIR) --plugin=protoc-gen-grpc=/usr/bin/grpc_cpp_plugin"
    cmd += " " + " ".join(["$(location %s)" % s for s in srcs])
    native.genrule(
        name = name + "_codegen",
        srcs = srcs + proto_deps,
        outs = outs,
        cmd = cmd,
        message = "protoc %s" % name,
    )
    native.cc_library(
        name = name,
        srcs = [o for o in outs if o.endswith(".cc")],
        hdrs = [o for o in outs if o.endswith(".h")],
        deps = deps + ["//third_party:grpc" if grpc else "//third_party:protobuf"],
        visibility = visibility,
    )
