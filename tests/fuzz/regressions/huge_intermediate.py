class G(torch.nn.Module):
    def forward(self, x: "f32[4, 8]"):
        ones: "f32[1000000000000]" = torch.ops.aten.ones.default([1000000000000], device = device(type='cpu'), pin_memory = False)
        add: "f32[4, 8]" = torch.ops.aten.add.Tensor(x, 1)
        return (add, ones)
