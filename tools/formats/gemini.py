# Gemini cases written by gen.py (the older gemini cases were written by hand).
TASK={"role":"user","parts":[{"text":"Fix the failing test in src/parse.py. Never edit vendor/."}]}
def call(i, text=None):
    parts=[{"text":text}] if text else []
    parts.append({"functionCall":{"id":"call_%d"%i,"name":"bash","args":{"cmd":"pytest -x"}}})
    return {"role":"model","parts":parts}
case('gemini','orphan-turn-dropped','A user turn holding only an orphan functionResponse is dropped; the two model turns it stood between are written as one, so turns still alternate.','gemini',
  [TASK,{"role":"model","parts":[{"text":"Looking at the parser."}]},{"role":"user","parts":[{"functionResponse":{"id":"ghost","name":"bash","response":{"output":"lost"}}}]},{"role":"model","parts":[{"text":"The month is off by one."}]}])
case('gemini','own-neighbours-stay','Two user turns next to each other in the caller\'s list stay two turns when the repair adds a stub elsewhere.','gemini',
  [TASK,{"role":"user","parts":[{"text":"And keep the tests fast."}]},call(2),{"role":"model","parts":[{"text":"Done."}]}])
case('gemini','ids-and-order','A turn that answers one call by id and the other by order pairs both: the response without an id takes the first call of its name that no response names by id.','gemini',
  [TASK,{"role":"model","parts":[{"functionCall":{"name":"bash","args":{"cmd":"pytest -x"}}},{"functionCall":{"id":"c2","name":"bash","args":{"cmd":"git status"}}}]},
   {"role":"user","parts":[{"functionResponse":{"id":"c2","name":"bash","response":{"output":"clean"}}},{"functionResponse":{"name":"bash","response":{"output":"1 failed"}}}]},
   {"role":"model","parts":[{"text":"One test fails."}]}],
  compact_opts={"context_window":100000})
