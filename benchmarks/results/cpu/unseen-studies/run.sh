for m in nf_resnet26 eca_resnet33ts edgenext_xx_small levit_128s; do
  s=$(date +%s)
  timeout 900 trt-inspect run $m --variants fp32,fp8 --rounds 2 --warmup 0.2 --out $OUT/$m.json --force > $OUT/$m.log 2>&1; rc=$?
  echo "$m rc=$rc $(( $(date +%s) - s )) s"
  for c in "show $OUT/$m.json --layers" "groups $OUT/$m.json" "export $OUT/$m.json --format md"; do
    timeout 300 trt-inspect $c > $OUT/$m.$(echo $c | cut -d' ' -f1).out 2>&1; echo "  $(echo $c | cut -d' ' -f1) rc=$?"
  done
done
