// expect: race at line 8
// argus: block-dim 128
// argus: size in = n
// argus: size out = 1
__global__ void reduce_racy(const float *in, float *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    out[0] += in[i];
  }
}
