// expect: race at line 11
// argus: block-dim 256
// argus: size data = n
// argus: size hist = 256
__global__ void hist_shared_racy(const unsigned *data, unsigned *hist, int n) {
  __shared__ unsigned h[256];
  int t = threadIdx.x;
  h[t] = 0;
  __syncthreads();
  for (int i = blockIdx.x * blockDim.x + t; i < n; i += gridDim.x * blockDim.x)
    h[data[i] & 255u] += 1u;
  __syncthreads();
  atomicAdd(&hist[t], h[t]);
}
