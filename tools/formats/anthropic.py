SYS={"role":"user","content":"Fix the failing test in src/parse.py. Never edit vendor/."}
def use(i, name="bash", inp=None, text=None):
    blocks=[]
    if text: blocks.append({"type":"text","text":text})
    blocks.append({"type":"tool_use","id":"toolu_%s"%i,"name":name,"input":inp or {"cmd":"pytest -x"}})
    return {"role":"assistant","content":blocks}
def res(i, text, **kw):
    b={"type":"tool_result","tool_use_id":"toolu_%s"%i,"content":text}; b.update(kw); return b
def user(*blocks): return {"role":"user","content":list(blocks)}
loop=[SYS]
for i in range(3):
    loop+=[use(i, text="Running the test (try %d)."%i), user(res(i,"FAILED test_dates - ValueError: bad month"))]
loop.append({"role":"assistant","content":[{"type":"text","text":"The month parser is off by one."}]})
case('anthropic','agent-loop','A valid Messages API loop comes back unchanged and auto-detects.','anthropic',loop,detected='anthropic')
case('anthropic','missing-and-orphan','A tool_use without a result gets a stub tool_result at the head of the next user message; an orphan tool_result is dropped.','anthropic',
  [SYS,use(1),user({"type":"text","text":"continue"}),use(2),user(res('ghost','lost'),res(2,'ok'))])
case('anthropic','order-and-late','A tool_result after other content moves to the head; a result two messages late moves into the message after its call.','anthropic',
  [SYS,use(1),user({"type":"text","text":"note"},res(1,'out')),use(2),user({"type":"text","text":"hey"}),{"role":"assistant","content":"hm"},user(res(2,'late'))])
case('anthropic','duplicate-ids','A tool_use id may be used once in a whole request: the second use is removed and leaves a note with its input.','anthropic',
  [SYS,use(1),user(res(1,'a')),use(1),user(res(1,'b'))])
img={"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0KGgo="}}
uf=[{"role":"user","content":[{"type":"text","text":"Fix it.","cache_control":{"type":"ephemeral"}}]},
    {"role":"assistant","content":[{"type":"thinking","thinking":"Let me look.","signature":"EqQBCkYIAxgCIkAKZ"},{"type":"tool_use","id":"toolu_s","name":"screenshot","input":{},"x-extra":1}]},
    user({"type":"text","text":"also"}),
    user(res('s',[{"type":"text","text":"the screen"},img],is_error=False,cache_control={"type":"ephemeral"}))]
case('anthropic','unknown-fields','A late result with an image moves into the message after its call with the image inside; thinking and cache_control survive.','anthropic',uf)
big="\n".join("src/module_%03d.py:%d: warning: unused import os"%(i,i*7) for i in range(600))
mid="\n".join("tests/test_%02d.py::test_case_%d PASSED"%(j,j) for j in range(60))
comp=[SYS]
for i in range(10):
    comp+=[use(i, text="Lint pass %d."%i, inp={"cmd":"ruff check src"}), user(res(i, big if i in (1,8) else mid))]
comp.append({"role":"assistant","content":[{"type":"text","text":"Two passes left warnings."}]})
case('anthropic','compact-offload','A compaction offloads the large outputs, folds the old turns into a checkpoint and keeps the tail.','anthropic',comp,compact_opts={"context_window":4000,"keep_tail":4})
case('anthropic','bad-block','A tool_use block without a name is refused, naming the field.','anthropic',
  [SYS,{"role":"assistant","content":[{"type":"tool_use","id":"t","input":{}}]}],error={"code":"EMISSING","where":"messages[1].content[0].name"})
