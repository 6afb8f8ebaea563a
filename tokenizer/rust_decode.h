// HfTokenizer::Decode as Hugging Face's tokenizers library (Rust; transformers'
// tokenizer.decode) decodes, for /v1/detokenize, which promises that output. The one
// difference from HfTokenizer::Decode (and its streaming, decode_stream.h) is a run of
// ByteFallback byte tokens ("<0xF0>", "<0x9F>", ...) that is not valid UTF-8 as a
// whole: Rust writes one U+FFFD per byte of the run (decoders/byte_fallback.rs), even
// for bytes of the run that would form a character; Decode writes one per maximal
// invalid subsequence, so that streamed text equals the whole. [<0xF0>, <0x9F>] is
// "\uFFFD\uFFFD" here, "\uFFFD" there; [<0x41>, <0xF0>] is "\uFFFD\uFFFD" here, "A\uFFFD"
// there. Every other id sequence decodes to the same text either way (ByteLevel's
// invalid bytes are one U+FFFD per maximal invalid subsequence in both, as Rust's
// String::from_utf8_lossy writes them).
//
// Thread-safe (a pure function of an immutable tokenizer).
#ifndef LOCKSTEP_TOKENIZER_RUST_DECODE_H_
#define LOCKSTEP_TOKENIZER_RUST_DECODE_H_

#include <cstdint>
#include <string>

#include "absl/types/span.h"
#include "tokenizer/hf_tokenizer.h"

namespace lockstep::tok {

std::string RustDecode(const HfTokenizer& tokenizer, absl::Span<const int32_t> ids,
                       bool skip_special_tokens = false);

}  // namespace lockstep::tok

#endif  // LOCKSTEP_TOKENIZER_RUST_DECODE_H_
