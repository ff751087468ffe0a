#!/usr/bin/env python3
"""Every path ARCHITECTURE.md names exists in the source tree (run from the tree root): the page
is kept current with the code (issue 28). A path may be whole, room-relative (cpu/conv.cpp),
a bare file name or stem, a brace set (a/{b,c}.cpp) or a glob. Exit 1 naming the missing ones."""
import re, os, subprocess, itertools, sys
s = open('ARCHITECTURE.md').read()
files = subprocess.run(['git','ls-files'],capture_output=True,text=True).stdout.split()
files += [l for l in subprocess.run(['git','ls-files','--others','--exclude-standard'],capture_output=True,text=True).stdout.split()]
bases = {}
for f in files:
    b=os.path.basename(f); bases.setdefault(b,[]).append(f)
    st=os.path.splitext(b)[0]; bases.setdefault(st,[]).append(f)
gen = ('build/', 'ddp/version_info.hpp','ddp/plugin/interface_hash.hpp','layer_type_files.cpp')
bad=[]
def expand(t):
    m=re.search(r'\{([^}]*)\}',t)
    if not m: return [t]
    return list(itertools.chain.from_iterable(expand(t[:m.start()]+x+t[m.end():]) for x in m.group(1).split(',')))
toks = re.findall(r'`([^`]+)`', s) + re.findall(r'\]\(([^)#]+)\)', s)
checked=0
for t in toks:
    if ' ' in t or '(' in t or '=' in t: continue
    pathlike = '/' in t or re.search(r'\.(cpp|hpp|cu|cuh|cmake|md|sh|py|toml|in|proto|lua|tcl)$', t)
    if not pathlike:
        # a bare stem such as `batch_feed`: only when it names no C++ identifier we can't judge; check stems with _ that look like files
        continue
    if t.startswith(gen) or t in gen: continue
    if '<' in t:
        pre=t.split('<')[0]
        ok=any(f.startswith(pre) for f in files)
    else:
        for u in expand(t):
            u=u.rstrip('/') if u.endswith('/') else u
            checked+=1
            if os.path.exists(u): continue
            if '*' in u:
                import glob
                if glob.glob(u): continue
            if '/' not in u and u in bases: continue
            # room-relative like cpu/conv.cpp, layers/x.cpp, presets/x.cpp, cuda/*.cu
            if any(f.endswith('/'+u) or ('/'+u+'/') in ('/'+f) for f in files): continue
            import fnmatch
            if any(fnmatch.fnmatch(f, '*/'+u) for f in files): continue
            if u in ('config.toml','run.json','metrics.jsonl','model.txt'): continue  # run-directory files
            bad.append(u)
        continue
    checked+=1
    if not ok: bad.append(t)
print('checked',checked,'missing',bad)
sys.exit(1 if bad else 0)
