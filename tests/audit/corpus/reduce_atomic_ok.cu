// expect: clean
// argus: block-dim 128
// argus: size in = n
// argus: size out = 1
__global__ void reduce_atomic(const float *in, float *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(out, in[i]);
}
