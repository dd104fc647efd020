# Responses cases written by gen.py (the older responses cases were written by hand).
def msg(role, text):
    return {"type": "message", "role": role,
            "content": [{"type": "input_text" if role == "user" else "output_text", "text": text}]}
def fc(i, cmd="pytest -x"):
    return {"type": "function_call", "call_id": "call_%s" % i, "name": "bash",
            "arguments": json.dumps({"cmd": cmd})}
def out(i, text):
    return {"type": "function_call_output", "call_id": "call_%s" % i, "output": text}
log = "\n".join("tests/test_%02d.py::test_case PASSED" % j for j in range(40))
items = [msg("user", "Fix the failing test in src/parse.py. Never edit vendor/.")]
for i in range(6):
    items += [fc(i), out(i, log)]
items += [fc("a"), fc("b", "git status"), out("b", "clean"), msg("assistant", "Waiting for the test run."),
          out("a", "1 failed: test_dates"), msg("user", "What failed?")]
case('responses', 'late-output-cut', 'A function_call_output that comes after an assistant message belongs to its call: the fold never cuts between them, so the view keeps the call with its late output.', 'responses', items,
  compact_opts={"context_window": 1400, "keep_tail": 1})
