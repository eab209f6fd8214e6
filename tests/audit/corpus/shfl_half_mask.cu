// expect: shuffle at line 10
// argus: block-dim 32
// argus: size in = n
// argus: size out = n
__global__ void shfl_half(const float *in, float *out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float v = i < n ? in[i] : 0.0f;
  int lane = threadIdx.x & 31;
  if (lane < 16) {
    v += __shfl_down_sync(0x0000ffffu, v, 4);
  }
  if (i < n) out[i] = v;
}
