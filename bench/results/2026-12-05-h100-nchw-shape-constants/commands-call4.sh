set -u
W=/tmp/w4; mkdir -p $W build-gpu/tests; cp -a .carry/g4/tests/. build-gpu/tests/
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee $W/gpu.txt; date -u | tee $W/date.txt
V="build-gpu/tests/kvtune_variant_time --layout nchw --dtype f32 --direction backward_data --ab .carry/g4/old/dwconv --rounds 3"
timeout 50 $V --n 16 --c 128 --h 56 --w 56 --kernel 31 --pad 15 tiled,rw=8,tx=8,ty=8,vc=1,halo=smem,filter=smem tiled,rw=4,tx=8,ty=8,vc=1,halo=smem,filter=smem tiled,rw=4,tx=16,ty=8,vc=1,halo=smem,filter=smem tiled,rw=4,tx=16,ty=4,vc=1,halo=smem,filter=smem tiled,rw=8,tx=8,ty=8,vc=4,halo=global,filter=smem tiled,rw=2,tx=32,ty=8,vc=1,halo=smem,filter=smem  > $W/ab-order-bwd31.txt 2>&1; echo "bwd31 rc $?"; cat $W/ab-order-bwd31.txt
timeout 30 $V --n 32 --c 96 --h 56 --w 56 --kernel 7 --pad 3 tiled,rw=4,tx=16,ty=8,vc=4,halo=global,filter=reg,rh=4 tiled,rw=8,tx=8,ty=8,vc=4,halo=global,filter=reg,rh=4 tiled,rw=8,tx=8,ty=8,vc=4,halo=global,filter=smem,rh=4 tiled,rw=4,tx=16,ty=4,vc=4,halo=global,filter=reg,rh=4 tiled,rw=4,tx=256,ty=1,vc=4,halo=global,filter=reg,rh=4,flat tiled,rw=8,tx=8,ty=8,vc=4,halo=global,filter=reg,rh=2  > $W/ab-order-bwd7.txt 2>&1; echo "bwd7 rc $?"; cat $W/ab-order-bwd7.txt
timeout 30 $V --n 32 --c 144 --h 56 --w 56 --kernel 3 --pad 1 tiled,rw=4,tx=128,ty=1,vc=4,halo=global,filter=reg,rh=2,flat tiled,rw=4,tx=16,ty=8,vc=4,halo=global,filter=reg,rh=4 tiled,rw=4,tx=64,ty=1,vc=4,halo=global,filter=reg,rh=2,flat tiled,rw=4,tx=16,ty=8,vc=4,halo=global,filter=reg,rh=2 tiled,rw=4,tx=16,ty=4,vc=4,halo=global,filter=smem,rh=4 > $W/ab-order-bwd3.txt 2>&1; echo "bwd3 rc $?"; cat $W/ab-order-bwd3.txt
cd build-gpu/tests
for t in "a sample of dwconv variants matches the float64 reference" "a sample of flat-item dwconv variants matches the float64 reference" "dwconv with an activation through the Context: every direction and layout against float64"; do
  (timeout 100 ./kvtune_tests "$t" --durations yes > "$W/gpu-${t:0:24}.txt" 2>&1; echo "rc $? $t" >> $W/gpu-rc.txt) &
done; wait; cd ../..
cat $W/gpu-rc.txt; tail -n 2 $W/gpu-*.txt; date -u; tar czf $OUT/call4.tgz -C $W .
