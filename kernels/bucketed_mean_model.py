"""A sequential model of the voxel mean's bucketed pipeline (kernels/voxelize.cu,
"Mean, bucketed"): every kernel's index arithmetic with the same constants
(buckets, chunks, histogram passes, scans, placements, the in-place bitonic
network with virtual padding), the atomics' order shuffled, compared with a
direct reference. It checks the algorithm, not the CUDA code (races,
barriers): the GPU tests do that. Run: python3 kernels/bucketed_mean_model.py
(NumPy; `cargo xtask env` puts one on PATH)."""
import random

import numpy as np
BUCKET_SHIFT=11; BV=1<<BUCKET_SHIFT; CT=256; CI=16; HB=2048; SE=4096; TP=4; WP=32; SP=8192; NO=0xFFFFFFFF
def run(keys_in, feats, voxels, hist_bins=HB, se=SE, chunk_items=CI):
    n=len(keys_in); F=feats.shape[1]
    buckets=(voxels+BV-1)//BV
    keys=np.array(keys_in,dtype=np.int64)
    bucket_counts=np.zeros(buckets,np.int64)
    chunk=CT*chunk_items
    nblocks=(n+chunk-1)//chunk
    # keys kernel
    for blk in range(nblocks):
        idx=[blk*chunk+k*CT+t for k in range(chunk_items) for t in range(CT)]
        idx=[i for i in idx if i<n]
        rng=0
        while rng<buckets:
            h=np.zeros(hist_bins,np.int64)
            for i in idx:
                v=keys[i]
                if v==NO: continue
                b=(v>>BUCKET_SHIFT)-rng
                if 0<=b<hist_bins: h[b]+=1
            for b in range(hist_bins):
                if rng+b<buckets and h[b]: bucket_counts[rng+b]+=h[b]
            rng+=hist_bins
    starts=np.zeros(buckets+1,np.int64); starts[1:]=np.cumsum(bucket_counts); cursors=starts[:-1].copy()
    entries=np.full(n,-1,np.int64)
    blocks=list(range(nblocks)); random.shuffle(blocks)
    for blk in blocks:
        idx=[blk*chunk+k*CT+t for k in range(chunk_items) for t in range(CT)]
        idx=[i for i in idx if i<n]
        rng=0
        while rng<buckets:
            h=np.zeros(hist_bins,np.int64); rank={}
            order=idx[:]; random.shuffle(order)
            for i in order:
                v=keys[i]
                if v==NO: continue
                b=(v>>BUCKET_SHIFT)-rng
                if 0<=b<hist_bins: rank[i]=h[b]; h[b]+=1
            base=np.zeros(hist_bins,np.int64)
            for b in range(hist_bins):
                if rng+b<buckets and h[b]: base[b]=cursors[rng+b]; cursors[rng+b]+=h[b]
            for i,r in rank.items():
                b=(keys[i]>>BUCKET_SHIFT)-rng
                assert entries[base[b]+r]==-1
                entries[base[b]+r]=((keys[i]&(BV-1))<<32)|i
            rng+=hist_bins
    mean=np.full((voxels,F),np.nan,np.float32); counts=np.full(voxels,-1,np.int64)
    for bucket in range(buckets):
        v0=bucket<<BUCKET_SHIFT; begin=starts[bucket]; m=starts[bucket+1]-begin
        vc=np.zeros(BV,np.int64)
        for j in range(m): vc[entries[begin+j]>>32]+=1
        ends=np.zeros(BV,np.int64); 
        vpt=BV//256
        tot=[vc[t*vpt:(t+1)*vpt].sum() for t in range(256)]
        pre=np.concatenate([[0],np.cumsum(tot)])
        for t in range(256):
            s=pre[t]
            for r in range(vpt): ends[t*vpt+r]=s; s+=vc[t*vpt+r]
        sorted_=np.full(m,-1,np.int64)
        order=list(range(m)); random.shuffle(order)
        for j in order:
            e=entries[begin+j]; p=ends[e>>32]; ends[e>>32]+=1; assert sorted_[p]==-1; sorted_[p]=e&0xFFFFFFFF
        for v in range(BV):
            if v0+v>=voxels: break
            nn=vc[v]; counts[v0+v]=nn; seg=ends[v]-nn
            if nn<=SP:
                s=sorted_[seg:seg+nn].copy()
                if nn>TP and nn<=WP: s=np.sort(s)  # warp bitonic (standard, full 32)
                elif nn>WP: 
                    size=1
                    while size<nn: size<<=1
                    k=2
                    while k<=size:
                        j=k>>1
                        while j>0:
                            for i in range(size//2):
                                low=(i&~(j-1))*2+(i&(j-1))
                                high= low^(k-1) if j==k>>1 else low+j
                                if high<nn and s[low]>s[high]: s[low],s[high]=s[high],s[low]
                            j>>=1
                        k<<=1
                    assert (np.diff(s)>0).all(), "bitonic"
                else:
                    s=np.sort(s)  # sort_four
            else:
                s=np.sort(sorted_[seg:seg+nn])
            acc=np.zeros(F,np.float64)
            for p in s: acc=acc+feats[p].astype(np.float64)
            mean[v0+v]=(acc/nn if nn else acc).astype(np.float32)
    return mean,counts
def reference(keys,feats,voxels):
    F=feats.shape[1]; acc=np.zeros((voxels,F)); c=np.zeros(voxels,np.int64)
    for i,v in enumerate(keys):
        if v==NO: continue
        acc[v]+=feats[i].astype(np.float64); c[v]+=1
    out=np.where(c[:,None]>0, acc/np.maximum(c,1)[:,None], 0).astype(np.float32)
    return out,c
random.seed(1)
rs=np.random.default_rng(1)
for case in range(6):
    voxels=int(rs.choice([1,5,2047,2048,2049,20000,70000]))
    n=int(rs.integers(1,9000))
    keys=list(rs.integers(0,voxels,size=n))
    # crowds
    for _ in range(3):
        v=int(rs.integers(0,voxels)); c=int(rs.choice([5,31,33,100,700]))
        keys+= [v]*c
    keys=[k if rs.random()>0.05 else NO for k in keys]
    random.shuffle(keys)
    feats=rs.normal(size=(len(keys),3)).astype(np.float32)
    hb = 2 if case%2 else HB
    got,gc=run(keys,feats,voxels,hist_bins=hb,chunk_items=2)
    want,wc=reference(keys,feats,voxels)
    assert (gc==wc).all()
    assert np.allclose(got,want,atol=1e-5), case
    print("case",case,"voxels",voxels,"n",len(keys),"hist_bins",hb,"ok")
