#!/usr/bin/env bash
# Regenerate the records tools/image_records.py made (every pipeline/images/records/aws-* but TF 2.14's
# training and inference and SKLearn 0.23-1's and 1.2-1's, written by hand) and pipeline/images/support.json, from a
# clone of aws/deep-learning-containers (its git directory: $1) and one of aws/sagemaker-scikit-learn-container
# ($2, for the SKLearn records) at the commits named below ($3: aws/sagemaker-xgboost-container's, $4:
# aws/sagemaker-pytorch-container's, for the XGBoost and the sagemaker-pytorch records).
#     tools/image_records_make.sh /path/to/deep-learning-containers/.git  [SKLEARN_GITDIR [XGBOOST_GITDIR [PYTORCH_CONTAINER_GITDIR]]]
set -euo pipefail
D=${1:?the git directory of a clone of aws/deep-learning-containers}
cd "$(dirname "$0")/.."
# The published data and the uv.lock builds as read on 2026-11-28.
DATA=e0ecedea6a1c56d6b5914f9cfb2fec5c548e67e0
gen() { .venv/bin/python tools/image_records.py --dlc "$D" --retrieved 2026-11-28 "$@"; }
R=pipeline/images/records
NUMBA="https://pypi.org/project/numba/0.67.0/|numba-0.67.0 wheel: METADATA|numba requires llvmlite"
PANDAS="https://pypi.org/project/pandas/2.2.3/|pandas-2.2.3 wheel: METADATA|pandas 2 requires tzdata, python-dateutil, pytz"
SEA="https://github.com/mwaskom/seaborn/blob/f04b6cd5484267a0885d1fed068e99dff3a1b226/pyproject.toml|pyproject.toml|seaborn requires numpy, pandas, matplotlib (commit of 2026-07-05)"
for v in 2.8:0f8bea76e85b6d49c4a5a2401cca54f4e425b565:cu129 2.9:959ce8a4ea1c00c6d542225404af13632df2e359:cu130 2.10:b872b74994eb91d42f5123ef87f8af3a24cd0425:cu130; do
  IFS=: read ver c cu <<< "$v"
  sm="sagemaker"; [ $ver = 2.10 ] && sm=""
  gen --dockerfile $c:pytorch/training/docker/$ver/py3/Dockerfile.cpu --support $DATA:docs/src/data/pytorch-training/$ver-cpu-sagemaker.yml \
      --name aws-pytorch-training-$ver-cpu --repository pytorch-training --closure torch pandas scikit-learn seaborn accelerate $sm --dependency matplotlib=seaborn --source "$SEA" --dependency llvmlite=numba --source "$NUMBA" --dependency tzdata=pandas --source "$PANDAS" --output $R/aws-pytorch-training-$ver-cpu.json
  gen --dockerfile $c:pytorch/training/docker/$ver/py3/$cu/Dockerfile.gpu --support $DATA:docs/src/data/pytorch-training/$ver-gpu-sagemaker.yml \
      --name aws-pytorch-training-$ver-gpu --repository pytorch-training --closure torch pandas scikit-learn seaborn accelerate $sm --dependency matplotlib=seaborn --source "$SEA" --dependency llvmlite=numba --source "$NUMBA" --dependency tzdata=pandas --source "$PANDAS" --output $R/aws-pytorch-training-$ver-gpu.json
done
# 2.1, 2.3, 2.4 and 2.5: not in AWS's docs/src/data; Python from the SDK (image_uri_config/
# pytorch.json 2.1.0: py310; 2.3.0, 2.4.0, 2.5.1: py311), GA and end of patch from support_policy.md.
for v in 2.1:db1f25d50fd2e9633c2bf43846794c203d22d0c6:cu121:2023-10-04:2024-10-04:py310 2.3:ea929428301aa13b6f1b7ff5f097ee3acaeb2cc6:cu121:2024-04-24:2025-04-24:py311 2.4:161b71090917af2ef8cac6e466640748601f5f7c:cu124:2024-07-24:2025-07-24:py311 2.5:1ca6a81abfca60a5031737a04952bdc3390bcc1c:cu124:2024-10-29:2025-10-29:py311; do
  IFS=: read ver c cu ga eop py <<< "$v"
  for acc in cpu gpu; do
    if [ $acc = cpu ]; then dir=py3; df=Dockerfile.cpu; else dir=py3/$cu; df=Dockerfile.gpu; fi
    gen --dockerfile $c:pytorch/training/docker/$ver/$dir/$df --set version=$ver --set accelerator=$acc --set python=$py --set ga=$ga --set eop=$eop \
        --set-source e8e9df1b6208da3da513b691c3c81670b27006fd:docs/reference/support_policy.md \
        --core $c:pytorch/training/docker/$ver/$dir/Dockerfile.sagemaker.$acc.core_packages.json \
        --name aws-pytorch-training-$ver-$acc --repository pytorch-training --closure torch pandas scikit-learn seaborn accelerate sagemaker --dependency matplotlib=seaborn --source "$SEA" --dependency llvmlite=numba --source "$NUMBA" --dependency tzdata=pandas --source "$PANDAS" --output $R/aws-pytorch-training-$ver-$acc.json
  done
done
# 2.6 and 2.7: the last commits that held their Dockerfiles, with AWS's core_packages.json.
for v in 2.6:dd3ba4642def128f9644025522d722cec3b713e9:cu126 2.7:e17a13ceaa4761298c4a27bff52a140b59a63612:cu128; do
  IFS=: read ver c cu <<< "$v"
  for acc in cpu gpu; do
    if [ $acc = cpu ]; then dir=py3; df=Dockerfile.cpu; else dir=py3/$cu; df=Dockerfile.gpu; fi
    gen --dockerfile $c:pytorch/training/docker/$ver/$dir/$df --support $DATA:docs/src/data/pytorch-training/$ver-$acc-sagemaker.yml \
        --core $c:pytorch/training/docker/$ver/$dir/Dockerfile.sagemaker.$acc.core_packages.json \
        --name aws-pytorch-training-$ver-$acc --repository pytorch-training --closure torch pandas scikit-learn seaborn accelerate sagemaker --dependency matplotlib=seaborn --source "$SEA" --dependency llvmlite=numba --source "$NUMBA" --dependency tzdata=pandas --source "$PANDAS" --output $R/aws-pytorch-training-$ver-$acc.json
  done
done
# TensorFlow training 2.16, 2.18 and 2.19 (CPU, GPU): the last commits that held their Dockerfiles,
# AWS's core_packages.json, and what tensorflow, tf-models-official (the version each
# Dockerfile pins) and shap 0.49.1 (2.19 pins shap<0.50, which resolves to it; 2.18 leaves shap
# unpinned, and every shap since 0.42 requires the same) require, from their wheels' METADATA.
# 2.16 and 2.18 are not in AWS's docs/src/data: its Python is the SDK's (image_uri_config/tensorflow.json
# 2.18.0: py310, as the Dockerfile's ARG PYTHON_VERSION=3.10.14), its dates support_policy.md's.
POL=e8e9df1b6208da3da513b691c3c81670b27006fd:docs/reference/support_policy.md
SHAP="https://pypi.org/project/shap/0.49.1/|shap-0.49.1-cp312-cp312-manylinux_2_17_x86_64.manylinux2014_x86_64.whl: METADATA Requires-Dist|shap requires scikit-learn, slicer, numba, cloudpickle, tqdm"
TFDEPS="absl-py astunparse flatbuffers gast google-pasta libclang opt-einsum packaging protobuf requests setuptools six termcolor typing-extensions wrapt grpcio tensorboard keras numpy h5py ml-dtypes"
TFMODEPS="google-api-python-client kaggle oauth2client pandas py-cpuinfo tensorflow-model-optimization gin-config tf-slim matplotlib opencv-python-headless pycocotools seqeval sentencepiece sacrebleu immutabledict ai-edge-litert"
SHAPDEPS="scikit-learn slicer numba cloudpickle tqdm"
tf_record() {  # VERSION COMMIT CPYTHON TF_VERSION TFMO_VERSION LABEL DOCKERFILE DIR TF WHEEL, then --support or --set arguments
  local ver=$1 c=$2 cp=$3 full=$4 mo=$5 label=$6 df=$7 dir=$8 tf=$9 wheel=${10}; shift 10
  local deps=() extra=$TFDEPS modeps=$TFMODEPS core=()
  [ $cp = cp310 ] && extra="$TFDEPS tensorflow-io-gcs-filesystem"  # tensorflow requires it below Python 3.12
  [ $mo = 2.16.0 ] && modeps=${TFMODEPS% ai-edge-litert}  # required from 2.18 on
  for d in $extra; do deps+=(--dependency "$d=$tf"); done
  for d in $modeps; do deps+=(--dependency "$d=tf-models-official"); done
  for d in $SHAPDEPS; do deps+=(--dependency "$d=shap"); done
  local json=tensorflow/training/docker/$ver/$dir/Dockerfile.sagemaker.$label.core_packages.json
  git -C "$D" cat-file -e $c:$json 2>/dev/null && core=(--core $c:$json)  # AWS keeps one from 2.18 on
  gen --dockerfile $c:tensorflow/training/docker/$ver/$df "$@" "${core[@]}" \
      --name aws-tensorflow-training-$ver-$label --repository tensorflow-training --closure sagemaker "${deps[@]}" \
      --source "https://pypi.org/project/$tf/$full/|$wheel-$full-$cp-$cp-manylinux_2_17_x86_64.manylinux2014_x86_64.whl: METADATA Requires-Dist|$tf $full requires ${extra// /, } on Linux" \
      --source "https://pypi.org/project/tf-models-official/$mo/|tf_models_official-$mo-py2.py3-none-any.whl: METADATA Requires-Dist|tf-models-official requires ${modeps// /, }" \
      --source "$SHAP" --output $R/aws-tensorflow-training-$ver-$label.json
}
for acc in "cpu py3/Dockerfile.cpu py3 tensorflow-cpu tensorflow_cpu" "gpu py3/cu125/Dockerfile.gpu py3/cu125 tensorflow tensorflow"; do
  read label df dir tf wheel <<< "$acc"
  tf_record 2.19 d9590225bbc41de43d96b1118f9d7f6714ceca10 cp312 2.19.0 2.19.1 $label $df $dir $tf $wheel \
      --support $DATA:docs/src/data/tensorflow-training/2.19-$label-sagemaker.yml
  tf_record 2.18 e76f361fc829de0a548c00b43b9e3cffe505c155 cp310 2.18.0 2.18.0 $label $df $dir $tf $wheel \
      --set version=2.18 --set accelerator=$label --set python=py310 --set ga=2024-10-24 --set eop=2025-10-24 --set-source $POL
  # 2.16: the SDK's 2.16.2 py310 (the Dockerfile's ARG PYTHON_VERSION=3.10.14); CUDA 12.3.
  [ $label = gpu ] && df=py3/cu123/Dockerfile.gpu dir=py3/cu123
  tf_record 2.16 5f1467b9e5f383b7a28886940a7c00323f2fed51 cp310 2.16.2 2.16.0 $label $df $dir $tf $wheel \
      --set version=2.16 --set accelerator=$label --set python=py310 --set ga=2024-03-07 --set eop=2025-03-07 --set-source $POL
done
c=a70e18c87888b7398c1ba66de77c0c5dc4e61614
gen --dockerfile $c:pytorch/inference/docker/2.6/py3/Dockerfile.cpu --support $DATA:docs/src/data/pytorch-inference/2.6-cpu-sagemaker.yml \
    --core $c:pytorch/inference/docker/2.6/py3/Dockerfile.sagemaker.cpu.core_packages.json \
    --name aws-pytorch-inference-2.6-cpu --repository pytorch-inference --closure torch --output $R/aws-pytorch-inference-2.6-cpu.json
gen --dockerfile $c:pytorch/inference/docker/2.6/py3/cu124/Dockerfile.gpu --support $DATA:docs/src/data/pytorch-inference/2.6-gpu-sagemaker.yml \
    --core $c:pytorch/inference/docker/2.6/py3/cu124/Dockerfile.sagemaker.gpu.core_packages.json \
    --name aws-pytorch-inference-2.6-gpu --repository pytorch-inference --closure torch --output $R/aws-pytorch-inference-2.6-gpu.json
c=ac7e218ad3f743a1ffc3846d87614d23e6b81a65
POL=e8e9df1b6208da3da513b691c3c81670b27006fd:docs/reference/support_policy.md
gen --dockerfile $c:pytorch/training/docker/2.2/py3/Dockerfile.cpu --set version=2.2 --set accelerator=cpu --set python=py310 --set ga=2024-01-30 --set eop=2025-01-30 --set-source $POL \
    --core $c:pytorch/training/docker/2.2/py3/Dockerfile.sagemaker.cpu.core_packages.json \
    --name aws-pytorch-training-2.2-cpu --repository pytorch-training --closure torch pandas scikit-learn accelerate sagemaker --dependency matplotlib=seaborn --source "$SEA" --dependency llvmlite=numba --source "$NUMBA" --dependency tzdata=pandas --source "$PANDAS" --output $R/aws-pytorch-training-2.2-cpu.json
gen --dockerfile $c:pytorch/training/docker/2.2/py3/cu121/Dockerfile.gpu --set version=2.2 --set accelerator=gpu --set python=py310 --set ga=2024-01-30 --set eop=2025-01-30 --set-source $POL \
    --core $c:pytorch/training/docker/2.2/py3/cu121/Dockerfile.sagemaker.gpu.core_packages.json \
    --name aws-pytorch-training-2.2-gpu --repository pytorch-training --closure torch pandas scikit-learn accelerate sagemaker --dependency matplotlib=seaborn --source "$SEA" --dependency llvmlite=numba --source "$NUMBA" --dependency tzdata=pandas --source "$PANDAS" --output $R/aws-pytorch-training-2.2-gpu.json
for acc in cpu:cpu:cpu cuda:gpu:cuda; do
  IFS=: read dir label data <<< "$acc"
  gen --dockerfile $DATA:docker/tensorflow/2.21/Dockerfile.$dir --support $DATA:docs/src/data/tensorflow-training/2.21-$label-sagemaker.yml \
      --lock $DATA:docker/tensorflow/2.21/$dir/uv.lock --extra sagemaker \
      --name aws-tensorflow-training-2.21-$label --repository tensorflow-training --output $R/aws-tensorflow-training-2.21-$label.json
  for v in 2.11 2.12 2.13; do
    gen --dockerfile $DATA:docker/pytorch/Dockerfile.$dir --support $DATA:docs/src/data/pytorch/$v-$data-sagemaker.yml \
        --lock $DATA:docker/pytorch/$v/$dir/uv.lock --extra sagemaker \
        --name aws-pytorch-$v-$label --repository pytorch --output $R/aws-pytorch-$v-$label.json
  done
done
.venv/bin/python tools/image_records.py support-table --dlc "$D" $DATA e8e9df1b6208da3da513b691c3c81670b27006fd:docs/reference/support_policy.md --output pipeline/images/support.json
# TensorFlow training 2.8 to 2.13 (CPU, GPU), the sagemaker stage of each version's Dockerfile at the
# commit before the one that deleted it. AWS's published data and support table have no row for
# these versions: no GA or end-of-patch date is recorded (eop null). The Python is the Dockerfile's
# ARG PYTHON_VERSION (the SDK's image_uri_config/tensorflow.json says the same: 2.12.0 and 2.13.0
# py310, 2.8.0 to 2.11.0 py39). What tensorflow (the GPU images: the tensorflow wheel; PyPI has no
# tensorflow-gpu past 2.11), tf-models-official and shap require is each wheel's METADATA
# Requires-Dist for Linux x86_64 at that Python (read with pip install --dry-run --no-deps --report);
# shap is unpinned in these Dockerfiles: 0.41.0's requirements, which every shap since has kept.
# tf-models-official's own tensorflow is uninstalled by the Dockerfile, so it is not listed.
SHAP41="https://pypi.org/project/shap/0.41.0/|shap-0.41.0 wheel: METADATA Requires-Dist|shap requires scikit-learn, slicer, numba, cloudpickle, tqdm, pandas, scipy, packaging"
SHAP41DEPS="scikit-learn slicer numba cloudpickle tqdm pandas scipy packaging"
SEA12="https://pypi.org/project/seaborn/0.12.2/|seaborn-0.12.2-py3-none-any.whl: METADATA Requires-Dist|seaborn requires numpy, pandas, matplotlib"
TFD213="absl-py astunparse flatbuffers gast google-pasta grpcio h5py keras libclang numpy opt-einsum packaging protobuf setuptools six tensorboard tensorflow-estimator termcolor typing-extensions wrapt tensorflow-io-gcs-filesystem"
TFD212="$TFD213 jax"
TFD210="$TFD213 keras-preprocessing"
MOD210="cython pillow gin-config google-api-python-client immutabledict kaggle matplotlib numpy oauth2client opencv-python-headless pandas psutil py-cpuinfo pycocotools pyyaml sacrebleu scipy sentencepiece seqeval six tensorflow-addons tensorflow-datasets tensorflow-hub tensorflow-model-optimization tensorflow-text tf-slim"
MOD213="${MOD210/ tensorflow-addons/}"
MOD29="${MOD210/ immutabledict/}"
tf_old_record() {  # VERSION COMMIT CPYTHON PYTHON TF_VERSION TFMO_VERSION(or -) TFDEPS MODEPS LABEL DIR
  local ver=$1 c=$2 cp=$3 py=$4 full=$5 mo=$6 tfdeps=$7 modeps=$8 label=$9 dir=${10}
  local df=tensorflow/training/docker/$ver/$dir/Dockerfile.$label tf=tensorflow-cpu wheel=tensorflow_cpu deps=() mosrc=() core=()
  [ $label = gpu ] && tf=tensorflow wheel=tensorflow
  local json=tensorflow/training/docker/$ver/$dir/Dockerfile.sagemaker.$label.core_packages.json
  git -C "$D" cat-file -e $c:$json 2>/dev/null && core=(--core $c:$json)  # 2.13 has one
  for d in $tfdeps; do deps+=(--dependency "$d=$tf"); done
  if [ $mo != - ]; then
    for d in $modeps; do deps+=(--dependency "$d=tf-models-official"); done
    mosrc=(--source "https://pypi.org/project/tf-models-official/$mo/|tf_models_official-$mo-py2.py3-none-any.whl: METADATA Requires-Dist|tf-models-official requires ${modeps// /, } (and tensorflow, which the Dockerfile uninstalls)")
  fi
  for d in $SHAP41DEPS; do deps+=(--dependency "$d=shap"); done
  local pv=${py#py}; pv=${pv:0:1}.${pv:1}
  gen --dockerfile $c:$df --set version=$ver --set accelerator=$label --set python=$py --set-source $c:$df "${core[@]}" \
      --set-what "ARG PYTHON_VERSION (Python $pv); AWS publishes no GA or end-of-patch date for $ver" \
      --dependency matplotlib=seaborn --source "$SEA12" \
      --name aws-tensorflow-training-$ver-$label --repository tensorflow-training --closure sagemaker "${deps[@]}" \
      --source "https://pypi.org/project/$tf/$full/|$wheel-$full-$cp-$cp-manylinux: METADATA Requires-Dist|$tf $full requires ${tfdeps// /, } on Linux x86_64" \
      "${mosrc[@]}" --source "$SHAP41" --output $R/aws-tensorflow-training-$ver-$label.json
}
for acc in "cpu py3" "gpu py3/cu118"; do
  read label dir <<< "$acc"
  tf_old_record 2.13 124a414fb228c7fe7f78b7ccb35f90b4fb67bc60 cp310 py310 2.13.0 2.13.0 "$TFD213" "$MOD213" $label $dir
  tf_old_record 2.12 89e1b3471ebe35768b12555650baf2f9a59c00aa cp310 py310 2.12.0 2.12.0 "$TFD212" "$MOD210" $label $dir
done
for acc in "cpu py3" "gpu py3/cu112"; do
  read label dir <<< "$acc"
  tf_old_record 2.11 0ade7eefabc060fc70fb3fcfbc93c88c99352d8b cp39 py39 2.11.1 2.11.0 "$TFD213" "$MOD210" $label $dir
  tf_old_record 2.10 44f39959e3eea673ebbe57a18f454999f9fb658a cp39 py39 2.10.1 2.10.0 "$TFD210" "$MOD210" $label $dir
  tf_old_record 2.9 2b1ffa1db7a5782e816a2a3314c1ee80af099e7a cp39 py39 2.9.3 2.9.2 "$TFD210" "$MOD29" $label $dir
  tf_old_record 2.8 a65eb78a976918b78bd2e6b1f415468005ce7994 cp39 py39 2.8.4 - "$TFD210" "" $label $dir
done
# TensorFlow training 1.15 and 2.0 to 2.6 (CPU, GPU): one-stage Dockerfiles (the stage is the first
# FROM's image), at the commit before the one that deleted each version's folder. No GA or end-of-patch
# date is published for these either. The Python is the Dockerfile's ARG PYTHON_VERSION (the SDK's
# tensorflow.json: 2.6.x py38; 2.2.x to 2.5.x py37; 2.0.x and 2.1.x py3/py36; 1.15.5 py3/py36/py37). The GPU image
# is the newest CUDA folder's. tensorflow's requirements: the PyPI wheel's METADATA Requires-Dist of the
# version AWS builds (1.15.5 and 2.0.4: the tensorflow wheel; PyPI has no tensorflow-cpu before 2.1); shap's and
# seaborn's only where the Dockerfile installs them.
TFD26="numpy absl-py astunparse clang flatbuffers google-pasta h5py keras-preprocessing opt-einsum protobuf six termcolor typing-extensions wheel wrapt gast tensorboard tensorflow-estimator keras grpcio"
TFD25="numpy absl-py astunparse flatbuffers google-pasta h5py keras-preprocessing opt-einsum protobuf six termcolor typing-extensions wheel wrapt gast tensorboard tensorflow-estimator keras-nightly grpcio"
TFD24="absl-py astunparse flatbuffers google-pasta h5py keras-preprocessing numpy opt-einsum protobuf six termcolor typing-extensions wheel wrapt gast tensorboard tensorflow-estimator grpcio"
TFD23="absl-py astunparse gast google-pasta h5py keras-preprocessing numpy opt-einsum protobuf tensorboard tensorflow-estimator termcolor wrapt wheel six grpcio"
TFD21="absl-py astor gast google-pasta keras-applications keras-preprocessing numpy opt-einsum protobuf tensorboard tensorflow-estimator termcolor wrapt six h5py grpcio wheel"
tf_single_record() {  # VERSION COMMIT CPYTHON PYTHON TF_VERSION TFDEPS LABEL DIR TF_DIST
  local ver=$1 c=$2 cp=$3 py=$4 full=$5 tfdeps=$6 label=$7 dir=$8 tf=$9 deps=() extra=()
  local df=tensorflow/training/docker/$ver/$dir/Dockerfile.$label
  local text; text=$(git --git-dir "$D" show $c:$df)  # read once: grep -q on a pipe races pipefail
  local stage; stage=$(awk 'toupper($1) == "FROM" {print $2; exit}' <<< "$text")
  for d in $tfdeps; do deps+=(--dependency "$d=$tf"); done
  if grep -q '"shap' <<< "$text"; then
    for d in $SHAP41DEPS; do deps+=(--dependency "$d=shap"); done
    extra+=(--source "$SHAP41")
  fi
  if grep -q 'seaborn' <<< "$text"; then
    deps+=(--dependency matplotlib=seaborn); extra+=(--source "$SEA12")
  fi
  local pv=${py#py}; pv=${pv:0:1}.${pv:1}
  gen --dockerfile $c:$df --stage "$stage" --set version=$ver --set accelerator=$label --set python=$py --set-source $c:$df \
      --set-what "ARG PYTHON_VERSION (Python $pv); AWS publishes no GA or end-of-patch date for $ver" \
      --name aws-tensorflow-training-$ver-$label --repository tensorflow-training --closure sagemaker "${deps[@]}" \
      --source "https://pypi.org/project/$tf/$full/|${tf//-/_}-$full-$cp-${cp}m-manylinux2010_x86_64.whl: METADATA Requires-Dist|$tf $full requires ${tfdeps// /, } on Linux x86_64" \
      "${extra[@]}" --output $R/aws-tensorflow-training-$ver-$label.json
}
for v in "2.6 3e717d20db19b3c962141db2734b8ce2345c1ba0 cp38 py38 2.6.3 TFD26 cu112" \
         "2.5 a030c0aab0d91657fb5607bc1d1547382fe9f11f cp37 py37 2.5.1 TFD25 cu112" \
         "2.4 fa6314c2e46f2c3576b2dedfd2211f228ffc6c6a cp37 py37 2.4.3 TFD24 cu110" \
         "2.3 8209021ae2af039feece22d1d62ab91513553a8e cp37 py37 2.3.4 TFD23 cu110" \
         "2.2 e578e2e49877a5af4ae65266485956e6577de82d cp37 py37 2.2.2 TFD23 cu102" \
         "2.1 e578e2e49877a5af4ae65266485956e6577de82d cp36 py36 2.1.3 TFD21 cu101" \
         "2.0 e578e2e49877a5af4ae65266485956e6577de82d cp36 py36 2.0.4 TFD21 cu100" \
         "1.15 12ece23a1a2566fbd6a6ee7856733395d9844bbd cp37 py37 1.15.5 TFD21 cu110"; do
  read ver c cp py full deps cu <<< "$v"
  tf=tensorflow-cpu; [ $ver = 1.15 ] || [ $ver = 2.0 ] && tf=tensorflow  # PyPI has no tensorflow-cpu before 2.1
  tf_single_record $ver $c $cp $py $full "${!deps}" cpu py3 $tf
  tf_single_record $ver $c $cp $py $full "${!deps}" gpu py3/$cu tensorflow
done
# PyTorch training 2.0, 1.13, 1.12, 1.11, 1.9, 1.8, 1.7 and 1.6 (CPU, GPU): each version's Dockerfile at the
# commit before the one that deleted its folder (2.0 to 1.11: the sagemaker stage; 1.9 and older: one stage,
# the first FROM's image), with AWS's core_packages.json where one was kept. The Python is the Dockerfile's
# ARG PYTHON_VERSION (the SDK's pytorch.json agrees: 2.0.1 py310, 1.13.1 py39, 1.9 to 1.12 py38, 1.6 to 1.8
# py36); GA and end of patch are the support table's for 2.0 and 1.13 and unpublished for the rest. The GPU
# image is the folder of the CUDA the SageMaker variant was released with (2.0: cu118, which also holds
# smdistributed). torch's requirements: its PyPI wheel's METADATA (other than the nvidia-* libraries and
# triton, which are not imported by name); for 1.6 to 1.8 (Python 3.6) they were not read: none are listed.
# pandas, scikit-learn, seaborn and sagemaker: their dependencies as this venv resolves them, as for 2.1 on.
pt_old_record() {  # VERSION COMMIT PYTHON LABEL DIR TORCH_VERSION TORCHDEPS (or -) then --set/--set-source arguments
  local ver=$1 c=$2 py=$3 label=$4 dir=$5 full=$6 tdeps=$7; shift 7
  local df=pytorch/training/docker/$ver/$dir/Dockerfile.$label deps=() extra=() core=()
  local text; text=$(git --git-dir "$D" show $c:$df)  # read once: grep -q on a pipe races pipefail
  local stage; stage=$(awk 'toupper($1) == "FROM" {print ($3 ? $4 : $2); exit}' <<< "$text")
  grep -q '^FROM .* AS sagemaker' <<< "$text" && stage=sagemaker
  local json=pytorch/training/docker/$ver/$dir/Dockerfile.sagemaker.$label.core_packages.json
  git -C "$D" cat-file -e $c:$json 2>/dev/null && core=(--core $c:$json)
  if [ "$tdeps" != - ]; then
    for d in $tdeps; do deps+=(--dependency "$d=torch"); done
    extra+=(--source "https://pypi.org/project/torch/$full/|torch-$full wheel for Python $py: METADATA Requires-Dist|torch $full requires ${tdeps// /, } (and NVIDIA's CUDA libraries)")
  fi
  if grep -q 'accelerate' <<< "$text"; then
    for d in numpy packaging psutil pyyaml; do deps+=(--dependency "$d=accelerate"); done
    extra+=(--source "https://pypi.org/project/accelerate/0.22.0/|accelerate-0.22.0-py3-none-any.whl: METADATA Requires-Dist|accelerate requires numpy, packaging, psutil, pyyaml, torch")
  fi
  if grep -q 'seaborn' <<< "$text"; then
    deps+=(--dependency matplotlib=seaborn); extra+=(--source "$SEA12")
  fi
  gen --dockerfile $c:$df --stage "$stage" --set version=$ver --set accelerator=$label "${core[@]}" "$@" \
      --name aws-pytorch-training-$ver-$label --repository pytorch-training --closure pandas scikit-learn sagemaker \
      "${deps[@]}" "${extra[@]}" --output $R/aws-pytorch-training-$ver-$label.json
}
POL=e8e9df1b6208da3da513b691c3c81670b27006fd:docs/reference/support_policy.md
for v in "2.0 cfe1b79db1ef6b30b1d10f95a6dddb8f1af36854 py310 cu118 2.0.1 2023-03-15 2024-03-15" \
         "1.13 7044c179b128cb9dab392fde471b001df1d5265d py39 cu117 1.13.1 2022-10-28 2024-10-28"; do
  read ver c py cu full ga eop <<< "$v"
  tdeps="typing-extensions"; [ $ver = 2.0 ] && tdeps="filelock typing-extensions sympy networkx jinja2"
  for acc in "cpu py3" "gpu py3/$cu"; do
    read label dir <<< "$acc"
    pt_old_record $ver $c $py $label $dir $full "$tdeps" --set python=$py --set ga=$ga --set eop=$eop --set-source $POL \
        --set-what "ga, eop (AWS's support table); python $py: the Dockerfile's ARG PYTHON_VERSION"
  done
done
for v in "1.12 37df056d4c0cb482b4369b017c0687e07ef1e0c0 py38 cu113 1.12.1 typing-extensions" \
         "1.11 37df056d4c0cb482b4369b017c0687e07ef1e0c0 py38 cu115 1.11.0 typing-extensions" \
         "1.9 37df056d4c0cb482b4369b017c0687e07ef1e0c0 py38 cu111 1.9.1 typing-extensions" \
         "1.8 37df056d4c0cb482b4369b017c0687e07ef1e0c0 py36 cu111 1.8.1 -" \
         "1.7 37df056d4c0cb482b4369b017c0687e07ef1e0c0 py36 cu110 1.7.1 -" \
         "1.6 58a21e4b6915f2d4584abf417e63e3920bf97a48 py36 cu110 1.6.0 -"; do
  read ver c py cu full tdeps <<< "$v"
  for acc in "cpu py3" "gpu py3/$cu"; do
    read label dir <<< "$acc"
    pv=${py#py}; pv=${pv:0:1}.${pv:1}
    pt_old_record $ver $c $py $label $dir $full "$tdeps" --set python=$py --set-source $c:pytorch/training/docker/$ver/$dir/Dockerfile.$label \
        --set-what "ARG PYTHON_VERSION (Python $pv); AWS publishes no GA or end-of-patch date for $ver"
  done
done
# SKLearn 1.0-1 and 1.4-2 (CPU): from a clone of aws/sagemaker-scikit-learn-container ($2: its git
# directory; skipped without it), each version's branch head: the base Dockerfile's last stage (conda's
# pyarrow, pip's scikit-learn; mlio is built from source and is not read) and requirements.txt, which the
# final Dockerfile pip-installs last. The Python is the base Dockerfile's ARG PYTHON_VERSION (the tags say
# only py3); AWS's DLC data dates no SKLearn image. What scikit-learn, pandas, Flask, gevent and
# cryptography require is their wheels' METADATA at the versions requirements.txt pins.
S=${2:-}
if [ -n "$S" ]; then
  sk_record() {  # VERSION BRANCH_COMMIT PYTHON PANDAS_VERSION SKLEARN_VERSION PANDAS_DEPS
    local ver=$1 c=$2 py=$3 pd=$4 sk=$5 pddeps=$6 deps=()
    local df=docker/$ver/base/Dockerfile.cpu pv=${3#py}; pv=${pv:0:1}.${pv:1}
    for d in joblib threadpoolctl; do deps+=(--dependency "$d=scikit-learn"); done
    for d in $pddeps; do deps+=(--dependency "$d=pandas"); done
    for d in click; do deps+=(--dependency "$d=flask"); done
    for d in zope.event zope.interface greenlet; do deps+=(--dependency "$d=gevent"); done
    deps+=(--dependency cffi=cryptography)
    .venv/bin/python tools/image_records.py --dlc "$S" --github aws/sagemaker-scikit-learn-container --retrieved 2026-11-28 \
        --dockerfile $c:$df --stage 'ubuntu:${UBUNTU_VERSION}@sha256:${UBUNTU_IMAGE_DIGEST}' --requirements $c:requirements.txt \
        --set version=$ver --set accelerator=cpu --set python=$py --set-source $c:$df \
        --set-what "ARG PYTHON_VERSION (Python $pv); AWS's DLC data dates no SKLearn image" \
        --uri-pattern "/sagemaker-scikit-learn:${ver//./\\.}-cpu-py3(?![0-9])" --name aws-sklearn-$ver --repository sagemaker-scikit-learn "${deps[@]}" \
        --source "https://pypi.org/project/scikit-learn/$sk/|scikit-learn-$sk wheel: METADATA Requires-Dist|scikit-learn requires numpy, scipy, joblib, threadpoolctl" \
        --source "https://pypi.org/project/pandas/$pd/|pandas-$pd wheel: METADATA Requires-Dist|pandas requires numpy, ${pddeps// /, }" \
        --source "https://pypi.org/project/Flask/1.1.1/|Flask-1.1.1-py2.py3-none-any.whl: METADATA Requires-Dist|Flask requires Werkzeug, Jinja2, itsdangerous, click" \
        --source "https://pypi.org/project/gevent/23.9.1/|gevent-23.9.1 wheel: METADATA Requires-Dist|gevent requires zope.event, zope.interface, greenlet" \
        --source "https://pypi.org/project/cryptography/|cryptography wheel: METADATA Requires-Dist|cryptography requires cffi" \
        --output $R/aws-sklearn-$ver.json
  }
  sk_record 1.0-1 117925d1d4ee65b1595355c742f3c0d140c046a9 py38 1.1.3 1.0.2 "python-dateutil pytz"
  sk_record 1.4-2 6c5704d20eabcd1561e9cb938671c92e79c32310 py310 2.3.2 1.4.2 "python-dateutil pytz tzdata"
fi
# XGBoost framework images (sagemaker-xgboost, the SDK's image_uri_config/xgboost.json; the built-in
# algorithm runs the same images) 0.90-1 to 3.0-5: from a clone of aws/sagemaker-xgboost-container ($3;
# skipped without it), each version's branch head (3.0-5: the default branch's): the base Dockerfile's
# last stage (conda's pyarrow, pip's xgboost; mlio and sagemaker-debugger are built from source or git
# and are not read) and requirements.txt, which the final Dockerfile pip-installs. The Python is the base
# Dockerfile's ARG PYTHON_VERSION; 0.90-2's has none, and the SDK's image_uri_config/xgboost.json says only
# py3: its Python is the one the same Dockerfile conda-installs (python=3.6.13). Dependencies of scikit-learn,
# pandas and Flask as this venv resolves them (as the DLC records' closure).
X=${3:-}
if [ -n "$X" ]; then
  xgb_record() {  # VERSION COMMIT PYTHON [WHERE THE DOCKERFILE NAMES IT]
    local ver=$1 c=$2 py=$3 df=docker/$1/base/Dockerfile.cpu
    local pv=${py#py}; pv=${pv:0:1}.${pv:1}
    local where=${4:-ARG PYTHON_VERSION}
    local text; text=$(git --git-dir "$X" show $c:$df)
    local stage; stage=$(awk 'toupper($1) == "FROM" {s = $2} END {print s}' <<< "$text")
    .venv/bin/python tools/image_records.py --dlc "$X" --github aws/sagemaker-xgboost-container --retrieved 2026-11-28 \
        --dockerfile $c:$df --stage "$stage" --requirements $c:requirements.txt \
        --set version=$ver --set accelerator=cpu --set python=$py --set-source $c:$df \
        --set-what "$where (Python $pv); AWS's DLC data dates no XGBoost image" \
        --uri-pattern "/sagemaker-xgboost:${ver//./\\.}(-cpu-py3)?\$" --name aws-xgboost-$ver --repository sagemaker-xgboost \
        --closure scikit-learn pandas flask --output $R/aws-xgboost-$ver.json
  }
  xgb_record 3.0-5 cb8df91cd44c7b01c53ccf321fd3fdf3eb78adae py310
  xgb_record 1.7-1 f7a93a21e50e44b4077f0889a7f676cad8c226f3 py39
  xgb_record 1.5-1 4eef773aab5c9e38a9ba945c8ad31c24d764d44a py38
  xgb_record 1.3-1 07ece4c7b4984690560406ec66a68176820ee921 py37
  xgb_record 1.2-2 dd637a025b8e644ab356a182fab4cd628b123b97 py37
  xgb_record 1.2-1 0d8f55de0bec7e7afe29923b217714a592ff5d77 py37
  xgb_record 1.0-1 0c7a3b8942f8cd75ea1c9e3c32bb83ea4b69b0a5 py37
  xgb_record 0.90-2 a034e4b46392a65034316106b039422c93c5d909 py36 "conda install -c conda-forge python=3.6.13"
  xgb_record 0.90-1 132188b309ef27b17ee9a769a0bdbbe8ddb802ee py37
fi
# TensorFlow training 2.7 and PyTorch training 1.10 (CPU, GPU): their SageMaker images are built FROM the
# EC2 image ($BASE_IMAGE): Dockerfile.sagemaker.<acc> with --base Dockerfile.ec2.<acc> (its last stage's
# installs first), at the commit before the one that deleted each version's folder. No GA or end-of-patch
# date is published for them. Python: ARG PYTHON_VERSION (the SDK: 2.7.1 py38, 1.10.2 py38). tensorflow
# 2.7.4's (both images install the tensorflow wheel) and torch 1.10.2's requirements: their wheels' METADATA.
TFD27="numpy absl-py astunparse libclang flatbuffers google-pasta h5py keras-preprocessing opt-einsum protobuf six termcolor typing-extensions wheel wrapt gast tensorboard tensorflow-estimator keras tensorflow-io-gcs-filesystem grpcio"
for acc in "cpu py3" "gpu py3/cu112"; do
  read label dir <<< "$acc"
  c=d91d6c184c07d5101c472b5b1972dea1d8c85e2c; df=tensorflow/training/docker/2.7/$dir/Dockerfile.sagemaker.$label
  deps=(); for d in $TFD27; do deps+=(--dependency "$d=tensorflow"); done
  for d in $SHAP41DEPS; do deps+=(--dependency "$d=shap"); done
  gen --dockerfile $c:$df --stage '$BASE_IMAGE' --base $c:tensorflow/training/docker/2.7/$dir/Dockerfile.ec2.$label \
      --set version=2.7 --set accelerator=$label --set python=py38 --set-source $c:$df \
      --set-what "ARG PYTHON_VERSION (Python 3.8); AWS publishes no GA or end-of-patch date for 2.7" \
      --name aws-tensorflow-training-2.7-$label --repository tensorflow-training --closure sagemaker "${deps[@]}" \
      --dependency matplotlib=seaborn --source "$SEA12" --source "$SHAP41" \
      --source "https://pypi.org/project/tensorflow/2.7.4/|tensorflow-2.7.4-cp38-cp38-manylinux2010_x86_64.whl: METADATA Requires-Dist|tensorflow 2.7.4 requires ${TFD27// /, } on Linux x86_64" \
      --output $R/aws-tensorflow-training-2.7-$label.json
done
for acc in "cpu py3" "gpu py3/cu113"; do
  read label dir <<< "$acc"
  c=37df056d4c0cb482b4369b017c0687e07ef1e0c0; df=pytorch/training/docker/1.10/$dir/Dockerfile.sagemaker.$label
  gen --dockerfile $c:$df --stage '$BASE_IMAGE' --base $c:pytorch/training/docker/1.10/$dir/Dockerfile.ec2.$label \
      --set version=1.10 --set accelerator=$label --set python=py38 --set-source $c:$df \
      --set-what "ARG PYTHON_VERSION (Python 3.8); AWS publishes no GA or end-of-patch date for 1.10" \
      --name aws-pytorch-training-1.10-$label --repository pytorch-training --closure pandas scikit-learn sagemaker \
      --dependency typing-extensions=torch --dependency matplotlib=seaborn --source "$SEA12" \
      --source "https://pypi.org/project/torch/1.10.2/|torch-1.10.2 wheel for Python py38: METADATA Requires-Dist|torch 1.10.2 requires typing-extensions" \
      --output $R/aws-pytorch-training-1.10-$label.json
done
# Hugging Face PyTorch training (GPU) and inference (CPU, GPU): the Dockerfiles at the commit before the one
# that deleted huggingface/pytorch, with AWS's published data (Python, tags, transformers version) at $DATA;
# no end-of-patch date is published for them. A training image is built FROM AWS's PyTorch training image:
# its record extends that version's (the Dockerfile's FROM names 2.0.0 where the 2.0 record is 2.0.1's) and
# holds what the Dockerfile adds. The tags' pattern names the transformers version each Dockerfile builds.
HF=eef459b8c9121ef0cc49375228cbf33452d8126e
hf_record() {  # KIND VERSION DIR ACCELERATOR then more arguments
  local kind=$1 ver=$2 dir=$3 acc=$4; shift 4
  local data=docs/src/data/huggingface-pytorch-$kind/$ver-$acc-sagemaker.yml
  local fields; fields=$(git --git-dir "$D" show $DATA:$data)
  local tf; tf=$(sed -n 's/^transformers: "\(.*\)"/\1/p' <<< "$fields")
  local py; py=$(sed -n 's/^python: \(py3[0-9]*\)/\1/p' <<< "$fields")
  gen --dockerfile $HF:huggingface/pytorch/$kind/docker/$ver/$dir/Dockerfile.$acc --stage :last --support $DATA:$data \
      --uri-pattern "/huggingface-pytorch-$kind:${ver//./\\.}(\\.\\d+)?-transformers${tf//./\\.}-$acc-$py" \
      --name aws-huggingface-pytorch-$kind-$ver-$acc --repository huggingface-pytorch-$kind "$@" \
      --output $R/aws-huggingface-pytorch-$kind-$ver-$acc.json
}
# 2.1, 2.0 and 1.13 leave datasets to the build arg DATASETS_VERSION: their buildspec at $HF gives it.
for v in "2.9 cu130 -" "2.5 cu124 -" "2.1 cu121 2-1" "2.0 cu118 2-0" "1.13 cu117 1-13"; do
  read ver cu spec <<< "$v"
  build=(); [ $spec != - ] && build=(--buildspec $HF:huggingface/pytorch/training/buildspec-$spec.yml)
  hf_record training $ver py3/$cu gpu --extends aws-pytorch-training-$ver-gpu "${build[@]}"
done
for v in "2.6 cu124" "2.1 cu118"; do
  read ver cu <<< "$v"
  hf_record inference $ver py3 cpu
  hf_record inference $ver py3/$cu gpu
done
# Hugging Face PyTorch training 2.6, 2.7 and 2.8 (GPU): no published data file; the Python is the one the
# FROM image's tag names (pytorch-training:2.8.0-gpu-py312-...; the SDK's huggingface.json agrees for
# 4.56.2 and 4.55.0), the transformers version the Dockerfile's ARG TRANSFORMERS_VERSION default. 2.3's
# Dockerfile leaves transformers and datasets to build args: its buildspec-2-3-0.yml gives them (and the
# SDK's huggingface.json pairs 4.48.0 with pytorch2.3.0 py311).
for v in "2.8 cu129 py312 4.56.2" "2.7 cu128 py312 4.55.0" "2.6 cu126 py312 4.51.3" "2.3 cu121 py311 4.48.0"; do
  read ver cu py tf <<< "$v"
  df=huggingface/pytorch/training/docker/$ver/py3/$cu/Dockerfile.gpu
  build=(); what="transformers: ARG TRANSFORMERS_VERSION=$tf"
  if [ $ver = 2.3 ]; then build=(--buildspec $HF:huggingface/pytorch/training/buildspec-2-3-0.yml); what="transformers: the buildspec's"; fi
  gen --dockerfile $HF:$df --stage :last --set version=$ver --set accelerator=gpu --set python=$py --set-source $HF:$df "${build[@]}" \
      --set-what "python $py: the FROM image's tag; $what; AWS publishes no data file or end-of-patch date for this image" \
      --uri-pattern "/huggingface-pytorch-training:${ver//./\\.}(\\.\\d+)?-transformers${tf//./\\.}-gpu-$py" \
      --extends aws-pytorch-training-$ver-gpu --name aws-huggingface-pytorch-training-$ver-gpu --repository huggingface-pytorch-training \
      --output $R/aws-huggingface-pytorch-training-$ver-gpu.json
done
# PyTorch inference 1.11 to 2.5 (CPU, GPU): the sagemaker stage of each version's Dockerfile at the commit
# before the one that deleted its folder, with AWS's core_packages.json where one was kept. Python: the
# Dockerfile's ARG PYTHON_VERSION; GA and end of patch: the support table's PyTorch row (1.13, 2.0 to 2.5;
# it names the framework, not the repository), none published for 1.11 and 1.12. torch's dependencies
# as this venv resolves them, as 2.6's.
for v in "2.5 a15f2f0209bde8f4cd7ba8ca45cf5fce694457ec cu124 py311 2024-10-29 2025-10-29" \
         "2.4 35dbb5bc7b29e074c81a392cdf86c8e52ccec9d6 cu124 py311 2024-07-24 2025-07-24" \
         "2.3 df83469a1da84aa2d247ec98445b0caac009ced7 cu121 py311 2024-04-24 2025-04-24" \
         "2.2 7b7d5294e8ed0041b185de6001198f896bee5eff cu118 py310 2024-01-30 2025-01-30" \
         "2.1 6fc2aa90e4e83cdd4b49d7548d2f2a7673895045 cu118 py310 2023-10-04 2024-10-04" \
         "2.0 8cb4488d0bc388b96d732df60c6cae11be85475f cu118 py310 2023-03-15 2024-03-15" \
         "1.13 053a25181f7eee76dee1ee19b6ba09a77611df12 cu117 py39 2022-10-28 2024-10-28" \
         "1.12 8c4c8281e120991ccf527c5541ebe93b18f4eb34 cu116 py38 - -" \
         "1.11 37df056d4c0cb482b4369b017c0687e07ef1e0c0 cu115 py38 - -"; do
  read ver c cu py ga eop <<< "$v"
  for acc in "cpu py3" "gpu py3/$cu"; do
    read label dir <<< "$acc"
    df=pytorch/inference/docker/$ver/$dir/Dockerfile.$label; core=(); dates=()
    json=pytorch/inference/docker/$ver/$dir/Dockerfile.sagemaker.$label.core_packages.json
    git -C "$D" cat-file -e $c:$json 2>/dev/null && core=(--core $c:$json)
    if [ $ga != - ]; then
      dates=(--set ga=$ga --set eop=$eop --set-source $POL --set-what "ga, eop (AWS's support table, its PyTorch row); python $py: the Dockerfile's ARG PYTHON_VERSION")
    else
      dates=(--set-source $c:$df --set-what "ARG PYTHON_VERSION (Python ${py:2:1}.${py:3}); AWS publishes no GA or end-of-patch date for $ver")
    fi
    # 2.0 keeps no core_packages.json: torchserve's and the toolkit's versions are build args of its buildspec.
    build=(); [ $ver = 2.0 ] && build=(--buildspec $c:pytorch/inference/buildspec-2-0-sm.yml)
    gen --dockerfile $c:$df --set version=$ver --set accelerator=$label --set python=$py "${dates[@]}" "${core[@]}" "${build[@]}" \
        --name aws-pytorch-inference-$ver-$label --repository pytorch-inference --closure torch --output $R/aws-pytorch-inference-$ver-$label.json
  done
done
# TensorFlow inference 2.8, 2.9, 2.10, 2.12 and 2.13 (CPU, GPU): the sagemaker stage of each version's
# Dockerfile at the commit before the one that deleted its folder (tensorflow-serving-api installed
# --no-dependencies: no tensorflow). The SDK's tags name no Python (tensorflow-inference:2.13-cpu); the
# Python is the Dockerfile's ARG PYTHON_VERSION; no GA or end-of-patch date is published. 2.11 had two
# Dockerfiles (py39, py310) for the same tags in 2023; at 1aaed12 (the commit 2.13 is read at) one py3
# Dockerfile is left, the one buildspec-2-11.yml builds the sagemaker target from (tag py39), and the
# record names that buildspec. boto3's, requests' and gevent's dependencies as this venv resolves them.
for v in "2.13 1aaed129ad23ddd9a61bcc2996e91a73f9ca5fec cu118 py310" "2.12 28e34a026d52cc796c589239515c55dedbc2f53f cu118 py310" \
         "2.11 1aaed129ad23ddd9a61bcc2996e91a73f9ca5fec cu112 py39" \
         "2.10 48dd0f2e0d239691b53a836b9944ab120d6cc3b9 cu112 py39" "2.9 cfffb7538d5d424f26a808a2e599df278f3f90f0 cu112 py39" \
         "2.8 be6176382de0a7e64428a4f515bda779e756f769 cu112 py39"; do
  read ver c cu py <<< "$v"
  for acc in "cpu py3" "gpu py3/$cu"; do
    read label dir <<< "$acc"
    df=tensorflow/inference/docker/$ver/$dir/Dockerfile.$label
    build=(); [ $ver = 2.11 ] && build=(--buildspec $c:tensorflow/inference/buildspec-2-11.yml)
    gen --dockerfile $c:$df --set version=$ver --set accelerator=$label --set python=$py --set-source $c:$df "${build[@]}" \
        --set-what "ARG PYTHON_VERSION (Python ${py:2:1}.${py:3}); AWS publishes no GA or end-of-patch date for $ver" \
        --uri-pattern "/tensorflow-inference:${ver//./\\.}(\\.\\d+)?-$label" \
        --name aws-tensorflow-inference-$ver-$label --repository tensorflow-inference --closure boto3 requests gevent \
        --output $R/aws-tensorflow-inference-$ver-$label.json
  done
done
# PyTorch inference 1.6 to 1.10 (CPU, GPU): one-stage Dockerfiles (1.6 to 1.9; --stage :last) and 1.10's
# SageMaker Dockerfile over its EC2 one (--base), at the commit before the one that deleted each folder.
# Python: ARG PYTHON_VERSION; no GA or end-of-patch date is published for them.
for v in "1.10 37df056d4c0cb482b4369b017c0687e07ef1e0c0 cu113 py38" "1.9 37df056d4c0cb482b4369b017c0687e07ef1e0c0 cu111 py38" \
         "1.8 37df056d4c0cb482b4369b017c0687e07ef1e0c0 cu111 py36" "1.7 37df056d4c0cb482b4369b017c0687e07ef1e0c0 cu110 py36" \
         "1.6 58a21e4b6915f2d4584abf417e63e3920bf97a48 cu101 py36"; do
  read ver c cu py <<< "$v"
  for acc in "cpu py3" "gpu py3/$cu"; do
    read label dir <<< "$acc"
    df=pytorch/inference/docker/$ver/$dir/Dockerfile.$label; two=(--stage :last)
    if [ $ver = 1.10 ]; then
      df=pytorch/inference/docker/$ver/$dir/Dockerfile.sagemaker.$label
      two=(--stage '$BASE_IMAGE' --base $c:pytorch/inference/docker/$ver/$dir/Dockerfile.ec2.$label)
    fi
    gen --dockerfile $c:$df "${two[@]}" --set version=$ver --set accelerator=$label --set python=$py --set-source $c:$df \
        --set-what "ARG PYTHON_VERSION (Python ${py:2:1}.${py:3}); AWS publishes no GA or end-of-patch date for $ver" \
        --name aws-pytorch-inference-$ver-$label --repository pytorch-inference --closure torch --output $R/aws-pytorch-inference-$ver-$label.json
  done
done
# TensorFlow inference 2.19, 2.18 and 2.16 (CPU, GPU): the sagemaker stage of each version's Dockerfile at the
# last commit on master that touched its folder, with AWS's core_packages.json. The SDK's tags name no Python
# (tensorflow-inference:2.19-cpu), so the URI pattern names none. 2.19: Python, GA and end of patch from AWS's
# published data; 2.18 and 2.16 are not in it: Python from the Dockerfile's ARG PYTHON_VERSION (3.10.14), GA and
# end of patch from the support table's TensorFlow row (it names the framework, not the repository).
for v in "2.19 43000050f3f7f4ebbf3bea1f4b0aa8df4efacb1c - - -" \
         "2.18 1e3d06facceba89894c8414cfdca29b7e5466186 py310 2024-10-24 2025-10-24" \
         "2.16 7c9758f3779827497b47978fe14c4e48b7106806 py310 2024-03-07 2025-03-07"; do
  read ver c py ga eop <<< "$v"
  for acc in "cpu py3" "gpu py3/cu122"; do
    read label dir <<< "$acc"
    df=tensorflow/inference/docker/$ver/$dir/Dockerfile.$label
    if [ $py = - ]; then
      facts=(--support $DATA:docs/src/data/tensorflow-inference/$ver-$label-sagemaker.yml)
    else
      facts=(--set version=$ver --set accelerator=$label --set python=$py --set ga=$ga --set eop=$eop --set-source $POL
             --set-what "ga, eop (AWS's support table, its TensorFlow row); python ${py:2:1}.${py:3}: the Dockerfile's ARG PYTHON_VERSION")
    fi
    gen --dockerfile $c:$df "${facts[@]}" --core $c:tensorflow/inference/docker/$ver/$dir/Dockerfile.sagemaker.$label.core_packages.json \
        --uri-pattern "/tensorflow-inference:${ver//./\\.}(\\.\\d+)?-$label" \
        --name aws-tensorflow-inference-$ver-$label --repository tensorflow-inference --closure boto3 requests gevent \
        --output $R/aws-tensorflow-inference-$ver-$label.json
  done
done
# TensorFlow inference 2.2 to 2.6 (CPU, GPU): one-stage Dockerfiles (--stage :last), the ones each version's
# buildspec (tensorflow/buildspec-2-<v>.yml) builds the inference image from, at the last commit on master that
# touched the folder (2.5's Dockerfile.sagemaker.gpu is buildspec-diy-sm-2-5.yml's DIY example, not read).
# Python: the Dockerfile's ARG PYTHON_VERSION; no GA or end-of-patch date is published for them.
for v in "2.6 0cd72b29b64601f1c4ddf8230c08eecd8d8448a5 cu112 py38" "2.5 1a8e0d99958255b8dac62452744e7292a7c3fcf5 cu112 py37" \
         "2.4 5d234e54f4736a9f7c84b7764fbd8137d067eadf cu110 py37" "2.3 48b60facf8f743552d146c04e8b522303cfa4acb cu102 py37" \
         "2.2 48b60facf8f743552d146c04e8b522303cfa4acb cu102 py37"; do
  read ver c cu py <<< "$v"
  for acc in "cpu py3" "gpu py3/$cu"; do
    read label dir <<< "$acc"
    df=tensorflow/inference/docker/$ver/$dir/Dockerfile.$label
    gen --dockerfile $c:$df --stage :last --set version=$ver --set accelerator=$label --set python=$py --set-source $c:$df \
        --set-what "ARG PYTHON_VERSION (Python ${py:2:1}.${py:3}); AWS publishes no GA or end-of-patch date for $ver" \
        --uri-pattern "/tensorflow-inference:${ver//./\\.}(\\.\\d+)?-$label" \
        --name aws-tensorflow-inference-$ver-$label --repository tensorflow-inference --closure boto3 requests gevent \
        --output $R/aws-tensorflow-inference-$ver-$label.json
  done
done
# TensorFlow inference 2.7 (CPU, GPU): buildspec-2-7.yml builds the SageMaker image from Dockerfile.sagemaker.*
# FROM the EC2 one (base_image_name; --stage '$BASE_IMAGE' --base), at the last commit on master that touched
# the folder. Python: ARG PYTHON_VERSION (3.8.9; tag py38); no GA or end-of-patch date is published.
c=59a5b43e2287b83fccd26693f2d4e657a03d2c98
for acc in "cpu py3" "gpu py3/cu112"; do
  read label dir <<< "$acc"
  d=tensorflow/inference/docker/2.7/$dir
  gen --dockerfile $c:$d/Dockerfile.sagemaker.$label --stage '$BASE_IMAGE' --base $c:$d/Dockerfile.ec2.$label \
      --set version=2.7 --set accelerator=$label --set python=py38 --set-source $c:$d/Dockerfile.sagemaker.$label \
      --set-what "ARG PYTHON_VERSION (Python 3.8); AWS publishes no GA or end-of-patch date for 2.7" \
      --uri-pattern "/tensorflow-inference:2\\.7(\\.\\d+)?-$label" \
      --name aws-tensorflow-inference-2.7-$label --repository tensorflow-inference --closure boto3 requests gevent \
      --output $R/aws-tensorflow-inference-2.7-$label.json
done
# Hugging Face PyTorch inference 2.3, 2.0 and 1.13 (CPU, GPU): no published data file; the Dockerfiles at $HF
# (--stage :last) leave transformers to the build arg TRANSFORMERS_VERSION, which each version's buildspec at
# $HF gives (--buildspec); the Python is the Dockerfile's ARG PYTHON_VERSION (the buildspec's tag agrees:
# py311, py310, py39); no end-of-patch date is published for them.
for v in "2.3 cu121 py311 4.48.0 2-3-0" "2.0 cu118 py310 4.28.1 2-0-0" "1.13 cu117 py39 4.26.0 1-13-1"; do
  read ver cu py tf spec <<< "$v"
  for acc in "cpu py3" "gpu py3/$cu"; do
    read label dir <<< "$acc"
    df=huggingface/pytorch/inference/docker/$ver/$dir/Dockerfile.$label
    gen --dockerfile $HF:$df --stage :last --set version=$ver --set accelerator=$label --set python=$py --set-source $HF:$df \
        --buildspec $HF:huggingface/pytorch/inference/buildspec-$spec.yml \
        --set-what "python ${py:2:1}.${py:3}: ARG PYTHON_VERSION; transformers: the buildspec's; AWS publishes no data file or end-of-patch date for this image" \
        --uri-pattern "/huggingface-pytorch-inference:${ver//./\\.}(\\.\\d+)?-transformers${tf//./\\.}-$label-$py" \
        --name aws-huggingface-pytorch-inference-$ver-$label --repository huggingface-pytorch-inference \
        --output $R/aws-huggingface-pytorch-inference-$ver-$label.json
  done
done
# PyTorch training and inference 1.2, 1.3, 1.4 and 1.5 (CPU, GPU; the py3 images): one-stage Dockerfiles
# (--stage :last) in each version's folder (1.2.0, 1.3.1, 1.4.0, 1.5.0: the SDK's pytorch.json aliases 1.2 to
# 1.5 to them) at the last commit that held it. Python: the Dockerfile's ARG PYTHON_VERSION (3.6.6, 3.6.13); the
# SDK's tags name py3 (1.4 and 1.5 also py36), so the pattern matches both and not py2. No GA or end-of-patch
# date is published. The sagemaker_pytorch_container wheel is a local file and is not read.
for v in "1.5 1.5.0 37df056d4c0cb482b4369b017c0687e07ef1e0c0 37df056d4c0cb482b4369b017c0687e07ef1e0c0 py3/cu101" \
         "1.4 1.4.0 37df056d4c0cb482b4369b017c0687e07ef1e0c0 89d9831204d7c4f690beac71d4fbed14a7192441 py3/cu101" \
         "1.3 1.3.1 9212c1e6d1910e658af970150d3e366ab9e5e698 9212c1e6d1910e658af970150d3e366ab9e5e698 py3" \
         "1.2 1.2.0 81e4328d69c3fb5221a2548d15498ae10939f911 81e4328d69c3fb5221a2548d15498ae10939f911 py3"; do
  read ver folder ctrain cinfer gpudir <<< "$v"
  for kind in training inference; do
    c=$ctrain; [ $kind = inference ] && c=$cinfer
    closure=(--closure pandas scikit-learn); [ $kind = inference ] && closure=(--closure torch)
    for acc in "cpu py3" "gpu $gpudir"; do
      read label dir <<< "$acc"
      df=pytorch/$kind/docker/$folder/$dir/Dockerfile.$label
      pv=$(git --git-dir "$D" show $c:$df | sed -n 's/^ARG PYTHON_VERSION=\([0-9]*\)\.\([0-9]*\).*/\1\2/p')
      gen --dockerfile $c:$df --stage :last --set version=$ver --set accelerator=$label --set python=py$pv --set-source $c:$df \
          --set-what "ARG PYTHON_VERSION (Python ${pv:0:1}.${pv:1}); AWS publishes no GA or end-of-patch date for $ver" \
          --uri-pattern "/pytorch-$kind:${ver//./\\.}(\\.\\d+)?-$label-py3" \
          --name aws-pytorch-$kind-$ver-$label --repository pytorch-$kind "${closure[@]}" --output $R/aws-pytorch-$kind-$ver-$label.json
    done
  done
done
# SKLearn 0.20.0 (CPU): the 0.20.0 branch head of aws/sagemaker-scikit-learn-container ($2), read as 1.0-1's: the
# base Dockerfile's last stage (pip's scikit-learn==0.20.0, conda's pyarrow) and requirements.txt, which the final
# Dockerfile pip-installs. Python: the base Dockerfile's ARG PYTHON_VERSION (3.7.10; the SDK's sklearn.json says
# only py3). What pandas and cryptography require: as this venv resolves them (dependency, unpinned).
if [ -n "$S" ]; then
  c=d021ef4dc6984e385847c317826f8b96e09c0fb3; df=docker/0.20.0/base/Dockerfile.cpu
  .venv/bin/python tools/image_records.py --dlc "$S" --github aws/sagemaker-scikit-learn-container --retrieved 2026-11-28 \
      --dockerfile $c:$df --stage 'ubuntu:${UBUNTU_VERSION}@sha256:${UBUNTU_IMAGE_DIGEST}' --requirements $c:requirements.txt \
      --set version=0.20.0 --set accelerator=cpu --set python=py37 --set-source $c:$df \
      --set-what "ARG PYTHON_VERSION (Python 3.7); AWS's DLC data dates no SKLearn image" \
      --uri-pattern "/sagemaker-scikit-learn:0\\.20\\.0-cpu-py3(?![0-9])" --name aws-sklearn-0.20.0 --repository sagemaker-scikit-learn \
      --closure pandas cryptography --output $R/aws-sklearn-0.20.0.json
fi
# Hugging Face images of 2021-2023 the SDK's image_uri_config/huggingface.json names (PyTorch training 1.6 to 1.10
# and inference 1.7 to 1.10; TensorFlow training 2.4 to 2.6 and inference 2.4, 2.5, 2.6 and 2.11; and the pairs of
# later versions whose records above name another transformers version: PyTorch training 2.3 with 4.46.1, inference
# 2.6 with 4.49.0 and 4.51.3): one record per
# framework version and transformers version (each was its own image, tag <version>-transformers<v>-<acc>-<py>).
# Each is read at the last commit whose buildspec built that pair (the buildspec named on its line, which gives
# TRANSFORMERS_VERSION and DATASETS_VERSION, --buildspec), the Dockerfile at that same commit (--stage sagemaker
# where it has one, else its last stage). A training image is built FROM AWS's framework training image: its record
# extends that version's and its Python is the one the FROM tag names; an inference image's Python is its ARG
# PYTHON_VERSION (the buildspec's tag and the SDK's py_versions agree). No end-of-patch date is published for them.
# KIND FRAMEWORK VERSION TRANSFORMERS ACCELERATOR COMMIT BUILDSPEC DOCKERFILE (under huggingface/FRAMEWORK/KIND) PYTHON
while read kind fw ver tv acc c bs dir py; do
  df=huggingface/$fw/$kind/docker/$ver/$dir/Dockerfile.$acc
  stage=:last; git --git-dir "$D" show $c:$df | grep -q '^FROM .* AS sagemaker' && stage=sagemaker
  if [ $kind = training ]; then
    more=(--extends aws-$fw-training-$ver-$acc); what="python ${py:2:1}.${py:3}: the FROM image's tag ($py)"
  else
    more=(); what="python ${py:2:1}.${py:3}: ARG PYTHON_VERSION"
  fi
  gen --dockerfile $c:$df --stage $stage --set version=$ver --set accelerator=$acc --set python=$py --set-source $c:$df \
      --buildspec $c:huggingface/$fw/$bs "${more[@]}" \
      --set-what "$what; transformers: the buildspec's; AWS publishes no data file or end-of-patch date for this image" \
      --uri-pattern "/huggingface-$fw-$kind:${ver//./\\.}(\\.\\d+)?-transformers${tv//./\\.}-$acc-$py" \
      --name aws-huggingface-$fw-$kind-$ver-transformers$tv-$acc --repository huggingface-$fw-$kind \
      --output $R/aws-huggingface-$fw-$kind-$ver-transformers$tv-$acc.json
done <<'ROWS'
training pytorch 1.6 4.4.2 gpu 770954479d0a47a52883830c9178e2218846aa04 buildspec.yml py3/cu110 py36
training pytorch 1.6 4.5.0 gpu 73215f02f1dfd0b4bbc0cf1dbcb0602de144cd38 buildspec-1-6.yml py3/cu110 py36
training pytorch 1.6 4.6.1 gpu 07a46fefecb575abd9136d1f53b591a68aac47a2 buildspec-1-6.yml py3/cu110 py36
training pytorch 1.7 4.6.1 gpu d6f0762e6e89468375f6b6b52a2783305a07587c buildspec-1-7-1.yml py3/cu110 py36
training pytorch 1.8 4.6.1 gpu e5535017b4ef1cc36163a3c65237125bb2910448 buildspec.yml py3/cu111 py36
training pytorch 1.8 4.10.2 gpu f8ff38ea964bac1f47ce00a25532b2f8041f8408 buildspec-1-8.yml py3/cu111 py36
training pytorch 1.9 4.10.2 gpu eccaf1f7fce4ff588496b2c8a3046a83a4b80c89 buildspec.yml py3/cu111 py38
training pytorch 1.9 4.11.0 gpu c4f350f9d802e81e06cf9edb1d4f104d9c115847 buildspec.yml py3/cu111 py38
training pytorch 1.9 4.12.3 gpu f8ff38ea964bac1f47ce00a25532b2f8041f8408 buildspec-1-9.yml py3/cu111 py38
training pytorch 1.10 4.17.0 gpu 4632f3da00d9ad499f653194154f99065569ce3c training/buildspec-1-10-2.yml py3/cu113 py38
inference pytorch 1.7 4.6.1 cpu d6f0762e6e89468375f6b6b52a2783305a07587c buildspec-1-7-1.yml py3 py36
inference pytorch 1.7 4.6.1 gpu d6f0762e6e89468375f6b6b52a2783305a07587c buildspec-1-7-1.yml py3/cu110 py36
inference pytorch 1.8 4.6.1 cpu e5535017b4ef1cc36163a3c65237125bb2910448 buildspec.yml py3 py36
inference pytorch 1.8 4.6.1 gpu e5535017b4ef1cc36163a3c65237125bb2910448 buildspec.yml py3/cu111 py36
inference pytorch 1.8 4.10.2 cpu f8ff38ea964bac1f47ce00a25532b2f8041f8408 buildspec-1-8.yml py3 py36
inference pytorch 1.8 4.10.2 gpu f8ff38ea964bac1f47ce00a25532b2f8041f8408 buildspec-1-8.yml py3/cu111 py36
inference pytorch 1.9 4.10.2 cpu eccaf1f7fce4ff588496b2c8a3046a83a4b80c89 buildspec.yml py3 py38
inference pytorch 1.9 4.10.2 gpu eccaf1f7fce4ff588496b2c8a3046a83a4b80c89 buildspec.yml py3/cu111 py38
inference pytorch 1.9 4.11.0 cpu c4f350f9d802e81e06cf9edb1d4f104d9c115847 buildspec.yml py3 py38
inference pytorch 1.9 4.11.0 gpu c4f350f9d802e81e06cf9edb1d4f104d9c115847 buildspec.yml py3/cu111 py38
inference pytorch 1.9 4.12.3 cpu f8ff38ea964bac1f47ce00a25532b2f8041f8408 buildspec-1-9.yml py3 py38
inference pytorch 1.9 4.12.3 gpu f8ff38ea964bac1f47ce00a25532b2f8041f8408 buildspec-1-9.yml py3/cu111 py38
inference pytorch 1.10 4.17.0 cpu 447e72722014d228353985a069d566ef1e072846 inference/buildspec-1-10-2.yml py3 py38
inference pytorch 1.10 4.17.0 gpu 447e72722014d228353985a069d566ef1e072846 inference/buildspec-1-10-2.yml py3/cu113 py38
training tensorflow 2.4 4.4.2 gpu 024ba77c7ffaa4f086a5fa0d3a93a22068b7a41b buildspec.yml py3/cu110 py37
training tensorflow 2.4 4.5.0 gpu 573256ac38a1dda8b6fdf9375ed2aa83b6524740 buildspec.yml py3/cu110 py37
training tensorflow 2.4 4.6.1 gpu d6f0762e6e89468375f6b6b52a2783305a07587c buildspec.yml py3/cu110 py37
training tensorflow 2.4 4.10.2 gpu 07a46fefecb575abd9136d1f53b591a68aac47a2 buildspec-2-4.yml py3/cu110 py37
training tensorflow 2.5 4.10.2 gpu eccaf1f7fce4ff588496b2c8a3046a83a4b80c89 buildspec.yml py3/cu112 py37
training tensorflow 2.5 4.11.0 gpu c4f350f9d802e81e06cf9edb1d4f104d9c115847 buildspec.yml py3/cu112 py37
training tensorflow 2.5 4.12.3 gpu 07a46fefecb575abd9136d1f53b591a68aac47a2 buildspec-2-5.yml py3/cu112 py37
training tensorflow 2.6 4.17.0 gpu ad2764a72b3979d5b80d42cfce56eb144418a446 training/buildspec-2-6-3.yml py3/cu112 py38
inference tensorflow 2.4 4.6.1 cpu d6f0762e6e89468375f6b6b52a2783305a07587c buildspec.yml py3 py37
inference tensorflow 2.4 4.6.1 gpu d6f0762e6e89468375f6b6b52a2783305a07587c buildspec.yml py3/cu110 py37
inference tensorflow 2.4 4.10.2 cpu 07a46fefecb575abd9136d1f53b591a68aac47a2 buildspec-2-4.yml py3 py37
inference tensorflow 2.4 4.10.2 gpu 07a46fefecb575abd9136d1f53b591a68aac47a2 buildspec-2-4.yml py3/cu110 py37
inference tensorflow 2.5 4.10.2 cpu eccaf1f7fce4ff588496b2c8a3046a83a4b80c89 buildspec.yml py3 py37
inference tensorflow 2.5 4.10.2 gpu eccaf1f7fce4ff588496b2c8a3046a83a4b80c89 buildspec.yml py3/cu112 py37
inference tensorflow 2.5 4.11.0 cpu c4f350f9d802e81e06cf9edb1d4f104d9c115847 buildspec.yml py3 py37
inference tensorflow 2.5 4.11.0 gpu c4f350f9d802e81e06cf9edb1d4f104d9c115847 buildspec.yml py3/cu112 py37
inference tensorflow 2.5 4.12.3 cpu 07a46fefecb575abd9136d1f53b591a68aac47a2 buildspec-2-5.yml py3 py37
inference tensorflow 2.5 4.12.3 gpu 07a46fefecb575abd9136d1f53b591a68aac47a2 buildspec-2-5.yml py3/cu112 py37
inference tensorflow 2.6 4.17.0 cpu f99524574c6e9e8e7be5ae85f9635b17d2aa2f05 inference/buildspec-2-6-3.yml py3 py38
inference tensorflow 2.6 4.17.0 gpu f99524574c6e9e8e7be5ae85f9635b17d2aa2f05 inference/buildspec-2-6-3.yml py3/cu112 py38
inference tensorflow 2.11 4.26.0 cpu f99524574c6e9e8e7be5ae85f9635b17d2aa2f05 inference/buildspec.yml py3 py39
inference tensorflow 2.11 4.26.0 gpu f99524574c6e9e8e7be5ae85f9635b17d2aa2f05 inference/buildspec.yml py3/cu112 py39
training pytorch 2.3 4.46.1 gpu 3101f57550c1b75a4bef5d3bd63f6d24b8ab49c9 training/buildspec.yml py3/cu121 py311
inference pytorch 2.6 4.49.0 cpu 1b094b0c87fb52ad0261c3f678fe0c1e9d66b811 inference/buildspec.yml py3 py312
inference pytorch 2.6 4.49.0 gpu df83469a1da84aa2d247ec98445b0caac009ced7 inference/buildspec.yml py3/cu124 py312
inference pytorch 2.6 4.51.3 cpu cc7c8dc2a16cfbfb5e6fa562e6ff79d0a763dfd9 inference/buildspec-2-6-0-transformers-4-53-1.yml py3 py312
inference pytorch 2.6 4.51.3 gpu cc7c8dc2a16cfbfb5e6fa562e6ff79d0a763dfd9 inference/buildspec-2-6-0-transformers-4-53-1.yml py3/cu124 py312
ROWS
# PyTorch 0.4, 1.0 and 1.1 (CPU, GPU; the py3 images of repository sagemaker-pytorch, which the SDK's
# pytorch.json names for training and inference alike): from a clone of aws/sagemaker-pytorch-container ($4; skipped
# without it), each version's base Dockerfile (one stage) at the last commit that held it; the final Dockerfile only
# pip-installs the sagemaker_pytorch_container wheel, a local file, which is not read. The base installs both the py2
# and the py3 branch of one shell `if` (the same torch version in each; fastai only in py3's). Python: the py3
# branch's interpreter (1.0, 1.1: apt-get install python3.6-dev; 0.4: ubuntu 16.04's python3-dev and the cp35 torch
# wheel: 3.5); the SDK's tags say only py3. 1.0's GPU base pip-installs torch with no version. No dates are published.
P=${4:-}
if [ -n "$P" ]; then
  for v in "1.1 1.1.0 b11dfc0a251a54b49bcd617f475d53fd415d239d py36 apt-get install python3.6-dev" \
           "1.0 1.0.0 b11dfc0a251a54b49bcd617f475d53fd415d239d py36 apt-get install python3.6-dev" \
           "0.4 0.4.0 1f2079e75bafbd3ed9bdad0bb00f031df0dd2981 py35 ubuntu 16.04's python3-dev, the cp35 torch wheel"; do
    read ver folder c py where <<< "$v"
    for label in cpu gpu; do
      df=docker/$folder/base/Dockerfile.$label
      .venv/bin/python tools/image_records.py --dlc "$P" --github aws/sagemaker-pytorch-container --retrieved 2026-11-28 \
          --dockerfile $c:$df --stage :last --set version=$ver --set accelerator=$label --set python=$py --set-source $c:$df \
          --set-what "python ${py:2:1}.${py:3}: the py3 branch's $where; AWS publishes no GA or end-of-patch date for $ver" \
          --uri-pattern "/sagemaker-pytorch:${ver//./\\.}(\\.\\d+)?-$label-py3" \
          --name aws-sagemaker-pytorch-$ver-$label --repository sagemaker-pytorch --output $R/aws-sagemaker-pytorch-$ver-$label.json
    done
  done
fi
