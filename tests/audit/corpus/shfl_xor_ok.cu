// expect: clean
// argus: block-dim 128
// argus: size in = n
// argus: size out = n
__global__ void shfl_xor(const float *in, float *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = i < n ? in[i] : 0.0f;
  for (int m = 1; m < 32; m <<= 1)
    v += __shfl_xor_sync(0xffffffffu, v, m);
  if (i < n) out[i] = v;
}
