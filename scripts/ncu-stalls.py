#!/usr/bin/env python3
# Warp-stall samples of a kernel by reason and by SASS opcode, from `ncu -i REP --page source --csv
# --print-source sass` (a report taken with --import-source yes and the SourceCounters section).
# Kernels whose name ends in _vt (E4M3's V transpose) are skipped. usage: scripts/ncu-stalls.py SASS.csv
import collections, csv, signal, sys
signal.signal(signal.SIGPIPE, signal.SIG_DFL)
path=sys.argv[1]
rows=open(path).read().split('\n')
# split into kernels
blocks=[]; cur=None
for line in rows:
    if line.startswith('"Kernel Name"'):
        cur=[line]; blocks.append(cur)
    elif cur is not None: cur.append(line)
for b in blocks:
    name=b[0].split(',')[1].strip('"')
    if name.endswith('_vt'): continue
    r=list(csv.reader(b[1:]))
    hdr=r[0]; data=[x for x in r[1:] if len(x)==len(hdr)]
    ix={h:i for i,h in enumerate(hdr)}
    stalls=[h for h in hdr if h.startswith('stall_') and '(Not Issued)' not in h]
    tot=collections.Counter(); byop=collections.defaultdict(collections.Counter); samp_op=collections.Counter()
    ninstr=collections.Counter()
    for x in data:
        src=x[ix['Source']].strip(); op=src.split()[0] if src else '?'
        if op.startswith('@'): op=src.split()[1]
        opb=op.split('.')[0]
        s=int(x[ix['Warp Stall Sampling (All Samples)']] or 0)
        samp_op[opb]+=s
        ninstr[opb]+=int(x[ix['Instructions Executed']] or 0)
        for h in stalls:
            v=int(x[ix[h]] or 0); tot[h]+=v; byop[opb][h]+=v
    T=sum(tot.values())
    print(name, 'samples', T)
    for h,v in tot.most_common(10): print(f'  {h:28s} {v/T*100:5.1f}%')
    print(' by opcode (samples %, warp instr executed):')
    for op,v in samp_op.most_common(16):
        top=', '.join(f'{h[6:]} {c/v*100:.0f}%' for h,c in byop[op].most_common(3)) if v else ''
        print(f'  {op:10s} {v/T*100:5.1f}%  {ninstr[op]:>10d}  {top}')
