module github.com/seatlease/seatlease/shared/clients/go

go 1.19
