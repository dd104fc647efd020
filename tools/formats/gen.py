"""Writes shared format cases (tests/data/formats/README.md) from a case script.

    python3 tools/formats/gen.py tools/formats/openai.py

A case script calls case(dialect, name, about, format, input, ...) for each case; the
expected outputs ("check", "repair", "compact") are taken from the CLI as it is now. They
are the spec from then on: read every one before committing it.
"""
import json, subprocess, os, sys, tempfile, shutil
ROOT=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CLI=os.path.join(ROOT,'build-c','ctxkeel')
OUT=os.path.join(ROOT,'tests','data','formats')
def run(args, inp, cwd=None):
    p=subprocess.run([CLI]+args, input=json.dumps(inp).encode(), capture_output=True, cwd=cwd)
    return p
def check(fmt, inp):
    p=run(['check','-','--format',fmt], inp)
    out=[]
    for line in p.stdout.decode().splitlines():
        if 'part' in line and 'messages[' in line:
            # -: messages[I] part K: KIND (tool call id "ID")
            rest=line.split('messages[',1)[1]
            i=int(rest.split(']')[0]); k=int(rest.split('part ')[1].split(':')[0])
            kind=rest.split(': ',1)[1].split(' (')[0]; id_=rest.split('id "',1)[1].rsplit('"',1)[0]
            out.append({"index":i,"part":k,"kind":kind,"id":id_})
    return out, p
def repair(fmt, inp):
    p=run(['repair','-','--format',fmt], inp)
    assert p.returncode==0, p.stderr
    return json.loads(p.stdout)
def compact(fmt, inp, opts):
    d=tempfile.mkdtemp()
    args=['compact','-','--format',fmt,'--store','st','--session','case','--window',str(opts['context_window'])]
    if 'keep_tail' in opts: args+=['--keep-tail',str(opts['keep_tail'])]
    if 'summary_max_tokens' in opts: args+=['--summary-max-tokens',str(opts['summary_max_tokens'])]
    p=run(args, inp, cwd=d)
    shutil.rmtree(d)
    assert p.returncode==0, p.stderr
    return json.loads(p.stdout)
def case(dialect, name, about, fmt, inp, detected=None, compact_opts=None, error=None, with_repair=True):
    c={"about":about,"format":fmt}
    if detected: c["detected"]=detected
    c["input"]=inp
    if error:
        c["error"]=error
    else:
        chk,_=check(fmt, inp); c["check"]=chk
        if chk and with_repair: c["repair"]=repair(fmt, inp)
        if compact_opts:
            c["compact"]={"options":compact_opts,"view":compact(fmt, inp, compact_opts)}
    os.makedirs(f'{OUT}/{dialect}', exist_ok=True)
    with open(f'{OUT}/{dialect}/{name}.json','w') as f:
        json.dump(c, f, indent=2, ensure_ascii=False); f.write('\n')
exec(open(sys.argv[1]).read())
