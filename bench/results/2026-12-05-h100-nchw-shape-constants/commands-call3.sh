set -u
W=/tmp/w3; mkdir -p $W/sass build-gpu/tests; cp -a .carry/g3/tests/. build-gpu/tests/
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $W/gpu.txt; date -u | tee $W/date.txt
for c in .carry/g3/cubin/*.cubin; do n=$(basename $c .cubin); cuobjdump -sass $c > $W/sass/$n.sass 2>&1 || /usr/local/cuda/bin/cuobjdump -sass $c > $W/sass/$n.sass 2>&1; done; ls -la $W/sass | head -3
bash bench/runtime_shape_tree.sh /tmp/rt > /dev/null
V="build-gpu/tests/kvtune_variant_time --layout nchw --dtype f32 --ab /tmp/rt/dwconv"
timeout 120 $V --direction backward_data --n 16 --c 128 --h 56 --w 56 --kernel 31 --pad 15 --rounds 5 tiled,rw=8,tx=8,ty=8,vc=1,halo=smem,filter=smem tiled,rw=4,tx=8,ty=8,vc=1,halo=smem,filter=smem tiled,rw=4,tx=16,ty=8,vc=1,halo=smem,filter=smem tiled,rw=4,tx=16,ty=4,vc=1,halo=smem,filter=smem tiled,rw=8,tx=8,ty=8,vc=4,halo=global,filter=smem tiled,rw=2,tx=32,ty=8,vc=1,halo=smem,filter=smem  > $W/ab-bwd31-r5.txt 2>&1; echo "bwd31 rc $?"; cat $W/ab-bwd31-r5.txt
timeout 60 $V --direction forward --n 16 --c 128 --h 56 --w 56 --kernel 31 --pad 15 --rounds 5 tiled,rw=8,tx=8,ty=8,vc=1,halo=smem,filter=smem tiled,rw=4,tx=8,ty=8,vc=1,halo=smem,filter=smem > $W/ab-fwd31-r5.txt 2>&1; echo "fwd31 rc $?"; cat $W/ab-fwd31-r5.txt
timeout 60 $V --direction backward_weight --n 32 --c 96 --h 56 --w 56 --kernel 7 --pad 3 --rounds 3 wgrad,ct=1,py=128,tg=49,split=5,reduce=ordered,rw=8,vc=4,rh=4,staged wgrad,ct=1,py=128,tg=49,split=5,reduce=ordered,rw=4,vc=4,rh=4,staged wgrad,ct=1,py=128,tg=49,split=5,reduce=ordered,rw=8,vc=4,rh=2,staged wgrad,ct=1,py=128,tg=49,split=20,reduce=ordered,rw=8,vc=4,rh=4,staged wgrad,ct=1,py=128,tg=49,split=20,reduce=ordered,rw=4,vc=4,rh=4,staged wgrad,ct=1,py=128,tg=49,split=10,reduce=ordered,rw=8,vc=4,rh=4,staged  > $W/ab-wgrad7.txt 2>&1; echo "wgrad7 rc $?"; cat $W/ab-wgrad7.txt
date -u; tar czf $OUT/call3.tgz -C $W .
