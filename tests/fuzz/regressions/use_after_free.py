class G(torch.nn.Module):
    def forward(self, x: "f32[4, 8]"):
        relu: "f32[4, 8]" = torch.ops.aten.relu.default(x);  x = None
        neg: "f32[4, 8]" = torch.ops.aten.neg.default(x)
        return (relu, neg)
