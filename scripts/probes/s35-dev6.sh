# Session 35's last seconds of device time: e4m3f16 and softmax_turns=1 against float64 on the
# small preset, nothing else (a first look; s36-dev1/-dev2 are the real runs). Carry: [".gpu"].
timeout 9 .gpu/evoattn check --preset small --dtype e4m3f16 2>&1 | tail -3
timeout 12 .gpu/evoattn check --preset small --dtype e4m3,bf16 --impl wgmma --config-on-plan --config softmax_turns=1 2>&1 | tail -4
