#!/usr/bin/env python3
"""Sends N concurrent OpenAI completion requests to a router and reports how they ended.

  openai_client.py HTTP_ADDR MODEL --count N [--max-tokens M] [--stream]
      [--ready-file PATH --ready-chunks K] [--timeout-s S]

Prints one JSON line: {"ok": n, "errors": n, "messages": [...]}. A request is ok when
it got HTTP 200 and (streaming) every event parsed, none carried an error, and the
stream ended with [DONE] after a finish_reason other than "error". With --ready-file,
the file is created once every stream has received K content chunks (the requests are
then generating). Exit status 0 always; the caller judges the counts.
"""
import argparse
import json
import threading
import urllib.error
import urllib.request


def one_request(args, index, chunks_seen, lock, all_streaming):
    body = {
        "model": args.model,
        "prompt": f"Request {index}: tell me a story about the number {index}.",
        "max_tokens": args.max_tokens,
        "temperature": 0,
        "ignore_eos": True,
        "stream": args.stream,
    }
    request = urllib.request.Request(
        f"http://{args.addr}/v1/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=args.timeout_s) as response:
            if not args.stream:
                reply = json.loads(response.read())
                if reply.get("choices"):
                    return None
                return f"no choices: {reply}"
            finish, done = None, False
            for raw in response:
                line = raw.decode().strip()
                if not line.startswith("data: "):
                    continue
                data = line[len("data: "):]
                if data == "[DONE]":
                    done = True
                    break
                event = json.loads(data)
                if "error" in event:
                    return f"error event: {event['error'].get('message')}"
                for choice in event.get("choices", []):
                    finish = choice.get("finish_reason") or finish
                with lock:
                    chunks_seen[index] += 1
                    if args.ready_file and min(chunks_seen) >= args.ready_chunks:
                        if not all_streaming.is_set():
                            all_streaming.set()
                            open(args.ready_file, "w").close()
            if not done:
                return "stream ended without [DONE]"
            if finish == "error":
                return "finish_reason error"
            return None
    except urllib.error.HTTPError as e:
        return f"HTTP {e.code}: {e.read()[:200]!r}"
    except Exception as e:  # connection reset, timeout, bad JSON: all count as errors
        return f"{type(e).__name__}: {e}"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("addr")
    parser.add_argument("model")
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--max-tokens", type=int, default=16)
    parser.add_argument("--stream", action="store_true")
    parser.add_argument("--ready-file")
    parser.add_argument("--ready-chunks", type=int, default=4)
    parser.add_argument("--timeout-s", type=float, default=120)
    args = parser.parse_args()

    chunks_seen = [0] * args.count
    lock = threading.Lock()
    all_streaming = threading.Event()
    results = [None] * args.count

    def run(i):
        results[i] = one_request(args, i, chunks_seen, lock, all_streaming)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(args.count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    errors = [r for r in results if r is not None]
    print(json.dumps({"ok": args.count - len(errors), "errors": len(errors), "messages": errors}))


if __name__ == "__main__":
    main()
