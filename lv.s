
/usr/bin/lua5.4:     file format elf64-x86-64


Disassembly of section .text:

000000000001b3a0 <lua_close@@LUA_5.4+0x4890>:
   1b3a0:	41 57                	push   %r15
   1b3a2:	49 89 ff             	mov    %rdi,%r15
   1b3a5:	41 56                	push   %r14
   1b3a7:	4c 8d 35 d2 57 02 00 	lea    0x257d2(%rip),%r14        # 40b80 <lua_ident@@LUA_5.4+0xe720>
   1b3ae:	41 55                	push   %r13
   1b3b0:	49 89 f5             	mov    %rsi,%r13
   1b3b3:	41 54                	push   %r12
   1b3b5:	55                   	push   %rbp
   1b3b6:	53                   	push   %rbx
   1b3b7:	48 83 ec 68          	sub    $0x68,%rsp
   1b3bb:	64 48 8b 04 25 28 00 	mov    %fs:0x28,%rax
   1b3c2:	00 00 
   1b3c4:	48 89 44 24 58       	mov    %rax,0x58(%rsp)
   1b3c9:	31 c0                	xor    %eax,%eax
   1b3cb:	45 8b 87 c0 00 00 00 	mov    0xc0(%r15),%r8d
   1b3d2:	4c 89 ed             	mov    %r13,%rbp
   1b3d5:	0f 1f 00             	nopl   (%rax)
   1b3d8:	4c 8b 55 00          	mov    0x0(%rbp),%r10
   1b3dc:	48 8b 5d 20          	mov    0x20(%rbp),%rbx
   1b3e0:	49 8b 02             	mov    (%r10),%rax
   1b3e3:	48 89 44 24 08       	mov    %rax,0x8(%rsp)
   1b3e8:	48 8b 40 18          	mov    0x18(%rax),%rax
   1b3ec:	48 8b 78 38          	mov    0x38(%rax),%rdi
   1b3f0:	48 89 3c 24          	mov    %rdi,(%rsp)
   1b3f4:	45 85 c0             	test   %r8d,%r8d
   1b3f7:	0f 85 0e 23 00 00    	jne    1d70b <lua_close@@LUA_5.4+0x6bfb>
   1b3fd:	49 83 c2 10          	add    $0x10,%r10
   1b401:	44 8b 23             	mov    (%rbx),%r12d
   1b404:	4c 8d 6b 04          	lea    0x4(%rbx),%r13
   1b408:	44 89 e3             	mov    %r12d,%ebx
   1b40b:	44 89 e0             	mov    %r12d,%eax
   1b40e:	c1 eb 07             	shr    $0x7,%ebx
   1b411:	83 e0 7f             	and    $0x7f,%eax
   1b414:	0f b6 db             	movzbl %bl,%ebx
   1b417:	49 8b 04 c6          	mov    (%r14,%rax,8),%rax
   1b41b:	48 c1 e3 04          	shl    $0x4,%rbx
   1b41f:	4c 01 d3             	add    %r10,%rbx
   1b422:	48 8d 4b 40          	lea    0x40(%rbx),%rcx
   1b426:	ff e0                	jmp    *%rax
   1b428:	0f 1f 84 00 00 00 00 	nopl   0x0(%rax,%rax,1)
   1b42f:	00 
   1b430:	45 89 e1             	mov    %r12d,%r9d
   1b433:	41 c1 e9 10          	shr    $0x10,%r9d
   1b437:	45 0f b6 c9          	movzbl %r9b,%r9d
   1b43b:	49 c1 e1 04          	shl    $0x4,%r9
   1b43f:	4d 01 d1             	add    %r10,%r9
   1b442:	48 8b 04 24          	mov    (%rsp),%rax
   1b446:	41 c1 ec 18          	shr    $0x18,%r12d
   1b44a:	49 c1 e4 04          	shl    $0x4,%r12
   1b44e:	49 01 c4             	add    %rax,%r12
   1b451:	31 c0                	xor    %eax,%eax
   1b453:	41 80 79 08 45       	cmpb   $0x45,0x8(%r9)
   1b458:	49 8b 34 24          	mov    (%r12),%rsi
   1b45c:	0f 84 2a 21 00 00    	je     1d58c <lua_close@@LUA_5.4+0x6a7c>
   1b462:	48 8b 55 08          	mov    0x8(%rbp),%rdx
   1b466:	4c 89 54 24 10       	mov    %r10,0x10(%rsp)
   1b46b:	49 89 c0             	mov    %rax,%r8
   1b46e:	48 89 d9             	mov    %rbx,%rcx
   1b471:	4c 89 6d 20          	mov    %r13,0x20(%rbp)
   1b475:	49 89 57 10          	mov    %rdx,0x10(%r15)
   1b479:	4c 89 e2             	mov    %r12,%rdx
   1b47c:	4c 89 ce             	mov    %r9,%rsi
   1b47f:	4c 89 ff             	mov    %r15,%rdi
   1b482:	e8 39 f0 ff ff       	call   1a4c0 <lua_close@@LUA_5.4+0x39b0>
   1b487:	44 8b 45 28          	mov    0x28(%rbp),%r8d
   1b48b:	4c 8b 54 24 10       	mov    0x10(%rsp),%r10
   1b490:	45 85 c0             	test   %r8d,%r8d
   1b493:	0f 85 87 01 00 00    	jne    1b620 <lua_close@@LUA_5.4+0x4b10>
   1b499:	4c 89 e8             	mov    %r13,%rax
   1b49c:	49 83 c5 04          	add    $0x4,%r13
   1b4a0:	44 8b 20             	mov    (%rax),%r12d
   1b4a3:	e9 60 ff ff ff       	jmp    1b408 <lua_close@@LUA_5.4+0x48f8>
   1b4a8:	0f 1f 84 00 00 00 00 	nopl   0x0(%rax,%rax,1)
   1b4af:	00 
   1b4b0:	48 8b 45 08          	mov    0x8(%rbp),%rax
   1b4b4:	4c 89 6d 20          	mov    %r13,0x20(%rbp)
   1b4b8:	41 c1 ec 0f          	shr    $0xf,%r12d
   1b4bc:	48 8d 73 30          	lea    0x30(%rbx),%rsi
   1b4c0:	4c 89 ff             	mov    %r15,%rdi
   1b4c3:	4c 89 54 24 10       	mov    %r10,0x10(%rsp)
   1b4c8:	49 89 47 10          	mov    %rax,0x10(%r15)
   1b4cc:	e8 2f 3d ff ff       	call   f200 <lua_yieldk@@LUA_5.4+0xc90>
   1b4d1:	44 89 e0             	mov    %r12d,%eax
   1b4d4:	4c 8b 54 24 10       	mov    0x10(%rsp),%r10
   1b4d9:	49 8d 44 85 00       	lea    0x0(%r13,%rax,4),%rax
   1b4de:	44 8b 20             	mov    (%rax),%r12d
   1b4e1:	4c 8d 68 04          	lea    0x4(%rax),%r13
   1b4e5:	f3 0f 6f 2b          	movdqu (%rbx),%xmm5
   1b4e9:	f3 0f 6f 73 10       	movdqu 0x10(%rbx),%xmm6
   1b4ee:	48 8d 43 70          	lea    0x70(%rbx),%rax
   1b4f2:	44 89 e2             	mov    %r12d,%edx
   1b4f5:	f3 0f 6f 7b 20       	movdqu 0x20(%rbx),%xmm7
   1b4fa:	48 8d 4b 40          	lea    0x40(%rbx),%rcx
   1b4fe:	c1 ea 18             	shr    $0x18,%edx
   1b501:	4c 89 ff             	mov    %r15,%rdi
   1b504:	0f 11 6b 40          	movups %xmm5,0x40(%rbx)
   1b508:	48 89 ce             	mov    %rcx,%rsi
   1b50b:	0f 11 73 50          	movups %xmm6,0x50(%rbx)
   1b50f:	0f 11 7b 60          	movups %xmm7,0x60(%rbx)
   1b513:	49 89 47 10          	mov    %rax,0x10(%r15)
   1b517:	4c 89 6d 20          	mov    %r13,0x20(%rbp)
   1b51b:	4c 89 54 24 18       	mov    %r10,0x18(%rsp)
   1b520:	48 89 4c 24 10       	mov    %rcx,0x10(%rsp)
   1b525:	e8 56 2d ff ff       	call   e280 <lua_getinfo@@LUA_5.4+0x1dc0>
   1b52a:	44 8b 45 28          	mov    0x28(%rbp),%r8d
   1b52e:	48 8b 4c 24 10       	mov    0x10(%rsp),%rcx
   1b533:	4c 8b 54 24 18       	mov    0x18(%rsp),%r10
   1b538:	45 85 c0             	test   %r8d,%r8d
   1b53b:	0f 85 bf 27 00 00    	jne    1dd00 <lua_close@@LUA_5.4+0x71f0>
   1b541:	45 8b 65 00          	mov    0x0(%r13),%r12d
   1b545:	49 83 c5 04          	add    $0x4,%r13
   1b549:	0f b6 41 08          	movzbl 0x8(%rcx),%eax
   1b54d:	a8 0f                	test   $0xf,%al
   1b54f:	74 18                	je     1b569 <lua_close@@LUA_5.4+0x4a59>
   1b551:	48 8b 11             	mov    (%rcx),%rdx
   1b554:	41 c1 ec 0f          	shr    $0xf,%r12d
   1b558:	88 43 28             	mov    %al,0x28(%rbx)
   1b55b:	44 89 e0             	mov    %r12d,%eax
   1b55e:	48 89 53 20          	mov    %rdx,0x20(%rbx)
   1b562:	48 c1 e0 02          	shl    $0x2,%rax
   1b566:	49 29 c5             	sub    %rax,%r13
   1b569:	45 85 c0             	test   %r8d,%r8d
   1b56c:	0f 85 f1 03 00 00    	jne    1b963 <lua_close@@LUA_5.4+0x4e53>
   1b572:	45 8b 65 00          	mov    0x0(%r13),%r12d
   1b576:	49 83 c5 04          	add    $0x4,%r13
   1b57a:	44 89 e3             	mov    %r12d,%ebx
   1b57d:	44 89 e0             	mov    %r12d,%eax
   1b580:	c1 eb 07             	shr    $0x7,%ebx
   1b583:	83 e0 7f             	and    $0x7f,%eax
   1b586:	0f b6 db             	movzbl %bl,%ebx
   1b589:	49 8b 04 c6          	mov    (%r14,%rax,8),%rax
   1b58d:	48 c1 e3 04          	shl    $0x4,%rbx
   1b591:	4c 01 d3             	add    %r10,%rbx
   1b594:	48 8d 4b 40          	lea    0x40(%rbx),%rcx
   1b598:	ff e0                	jmp    *%rax
   1b59a:	66 0f 1f 44 00 00    	nopw   0x0(%rax,%rax,1)
   1b5a0:	48 8b 44 24 08       	mov    0x8(%rsp),%rax
   1b5a5:	4c 89 6d 20          	mov    %r13,0x20(%rbp)
   1b5a9:	41 c1 ec 07          	shr    $0x7,%r12d
   1b5ad:	48 89 ea             	mov    %rbp,%rdx
   1b5b0:	41 0f b6 f4          	movzbl %r12b,%esi
   1b5b4:	4c 89 ff             	mov    %r15,%rdi
   1b5b7:	48 8b 48 18          	mov    0x18(%rax),%rcx
   1b5bb:	e8 b0 d7 ff ff       	call   18d70 <lua_close@@LUA_5.4+0x2260>
   1b5c0:	44 8b 45 28          	mov    0x28(%rbp),%r8d
   1b5c4:	45 85 c0             	test   %r8d,%r8d
   1b5c7:	0f 85 4e 29 00 00    	jne    1df1b <lua_close@@LUA_5.4+0x740b>
   1b5cd:	48 8b 45 00          	mov    0x0(%rbp),%rax
   1b5d1:	4c 8d 50 10          	lea    0x10(%rax),%r10
   1b5d5:	e9 bf fe ff ff       	jmp    1b499 <lua_close@@LUA_5.4+0x4989>
   1b5da:	66 0f 1f 44 00 00    	nopw   0x0(%rax,%rax,1)
   1b5e0:	48 8b 45 08          	mov    0x8(%rbp),%rax
   1b5e4:	4c 89 6d 20          	mov    %r13,0x20(%rbp)
   1b5e8:	41 c1 ec 18          	shr    $0x18,%r12d
   1b5ec:	48 89 da             	mov    %rbx,%rdx
   1b5ef:	41 8d 4c 24 ff       	lea    -0x1(%r12),%ecx
   1b5f4:	48 89 ee             	mov    %rbp,%rsi
   1b5f7:	4c 89 ff             	mov    %r15,%rdi
   1b5fa:	4c 89 54 24 10       	mov    %r10,0x10(%rsp)
   1b5ff:	49 89 47 10          	mov    %rax,0x10(%r15)
   1b603:	e8 68 d8 ff ff       	call   18e70 <lua_close@@LUA_5.4+0x2360>
   1b608:	44 8b 45 28          	mov    0x28(%rbp),%r8d
   1b60c:	4c 8b 54 24 10       	mov    0x10(%rsp),%r10
   1b611:	45 85 c0             	test   %r8d,%r8d
   1b614:	0f 84 7f fe ff ff    	je     1b499 <lua_close@@LUA_5.4+0x4989>
   1b61a:	66 0f 1f 44 00 00    	nopw   0x0(%rax,%rax,1)
   1b620:	4c 89 ee             	mov    %r13,%rsi
   1b623:	4c 89 ff             	mov    %r15,%rdi
   1b626:	e8 75 17 ff ff       	call   cda0 <lua_getinfo@@LUA_5.4+0x8e0>
   1b62b:	41 89 c0             	mov    %eax,%r8d
   1b62e:	eb 9d                	jmp    1b5cd <lua_close@@LUA_5.4+0x4abd>
   1b630:	48 8b 7c 24 08       	mov    0x8(%rsp),%rdi
   1b635:	41 c1 ec 0f          	shr    $0xf,%r12d
   1b639:	44 89 44 24 28       	mov    %r8d,0x28(%rsp)
   1b63e:	44 89 e0             	mov    %r12d,%eax
   1b641:	4c 89 54 24 20       	mov    %r10,0x20(%rsp)
   1b646:	48 8b 57 18          	mov    0x18(%rdi),%rdx
   1b64a:	48 8b 52 48          	mov    0x48(%rdx),%rdx
   1b64e:	4c 8b 24 c2          	mov    (%rdx,%rax,8),%r12
   1b652:	48 8b 45 08          	mov    0x8(%rbp),%rax
   1b656:	4c 89 6d 20          	mov    %r13,0x20(%rbp)
   1b65a:	41 8b 54 24 10       	mov    0x10(%r12),%edx
   1b65f:	4d 8b 4c 24 50       	mov    0x50(%r12),%r9
   1b664:	49 89 47 10          	mov    %rax,0x10(%r15)
   1b668:	48 8d 47 20          	lea    0x20(%rdi),%rax
   1b66c:	4c 89 ff             	mov    %r15,%rdi
   1b66f:	48 89 44 24 30       	mov    %rax,0x30(%rsp)
   1b674:	89 d6                	mov    %edx,%esi
   1b676:	4c 89 4c 24 18       	mov    %r9,0x18(%rsp)
   1b67b:	89 54 24 10          	mov    %edx,0x10(%rsp)
   1b67f:	e8 ec 39 ff ff       	call   f070 <lua_yieldk@@LUA_5.4+0xb00>
   1b684:	4c 8b 4c 24 18       	mov    0x18(%rsp),%r9
   1b689:	4c 8b 54 24 20       	mov    0x20(%rsp),%r10
   1b68e:	4c 89 60 18          	mov    %r12,0x18(%rax)
   1b692:	48 89 c1             	mov    %rax,%rcx
   1b695:	45 31 e4             	xor    %r12d,%r12d
   1b698:	44 8b 44 24 28       	mov    0x28(%rsp),%r8d
   1b69d:	48 89 03             	mov    %rax,(%rbx)
   1b6a0:	48 63 44 24 10       	movslq 0x10(%rsp),%rax
   1b6a5:	c6 43 08 46          	movb   $0x46,0x8(%rbx)
   1b6a9:	85 c0                	test   %eax,%eax
   1b6ab:	4c 8d 1c c5 00 00 00 	lea    0x0(,%rax,8),%r11
   1b6b2:	00 
   1b6b3:	0f 8e 2d 1e 00 00    	jle    1d4e6 <lua_close@@LUA_5.4+0x69d6>
   1b6b9:	48 89 5c 24 28       	mov    %rbx,0x28(%rsp)
   1b6be:	48 8b 5c 24 30       	mov    0x30(%rsp),%rbx
   1b6c3:	4c 89 7c 24 10       	mov    %r15,0x10(%rsp)
   1b6c8:	4d 89 df             	mov    %r11,%r15
   1b6cb:	4c 89 6c 24 30       	mov    %r13,0x30(%rsp)
   1b6d0:	4d 89 cd             	mov    %r9,%r13
   1b6d3:	48 89 6c 24 38       	mov    %rbp,0x38(%rsp)
   1b6d8:	4c 89 e5             	mov    %r12,%rbp
   1b6db:	49 89 cc             	mov    %rcx,%r12
   1b6de:	44 89 44 24 20       	mov    %r8d,0x20(%rsp)
   1b6e3:	4c 89 54 24 18       	mov    %r10,0x18(%rsp)
   1b6e8:	eb 2e                	jmp    1b718 <lua_close@@LUA_5.4+0x4c08>
   1b6ea:	66 0f 1f 44 00 00    	nopw   0x0(%rax,%rax,1)
   1b6f0:	48 8b 04 f3          	mov    (%rbx,%rsi,8),%rax
   1b6f4:	49 89 44 2c 20       	mov    %rax,0x20(%r12,%rbp,1)
   1b6f9:	41 f6 44 24 09 20    	testb  $0x20,0x9(%r12)
   1b6ff:	74 0a                	je     1b70b <lua_close@@LUA_5.4+0x4bfb>
   1b701:	f6 40 09 18          	testb  $0x18,0x9(%rax)
   1b705:	0f 85 9d 1d 00 00    	jne    1d4a8 <lua_close@@LUA_5.4+0x6998>
   1b70b:	48 83 c5 08          	add    $0x8,%rbp
   1b70f:	4c 39 fd             	cmp    %r15,%rbp
   1b712:	0f 84 b0 1d 00 00    	je     1d4c8 <lua_close@@LUA_5.4+0x69b8>
   1b718:	41 80 7c 6d 08 00    	cmpb   $0x0,0x8(%r13,%rbp,2)
   1b71e:	41 0f b6 74 6d 09    	movzbl 0x9(%r13,%rbp,2),%esi
   1b724:	74 ca                	je     1b6f0 <lua_close@@LUA_5.4+0x4be0>
   1b726:	48 8b 44 24 18       	mov    0x18(%rsp),%rax
   1b72b:	48 c1 e6 04          	shl    $0x4,%rsi
   1b72f:	48 8b 7c 24 10       	mov    0x10(%rsp),%rdi
   1b734:	48 01 c6             	add    %rax,%rsi
   1b737:	e8 14 3a ff ff       	call   f150 <lua_yieldk@@LUA_5.4+0xbe0>
   1b73c:	eb b6                	jmp    1b6f4 <lua_close@@LUA_5.4+0x4be4>
   1b73e:	66 90                	xchg   %ax,%ax
   1b740:	44 89 e0             	mov    %r12d,%eax
   1b743:	45 89 e0             	mov    %r12d,%r8d
   1b746:	c1 e8 10             	shr    $0x10,%eax
   1b749:	41 c1 e8 18          	shr    $0x18,%r8d
   1b74d:	0f b6 c0             	movzbl %al,%eax
   1b750:	44 8d 48 ff          	lea    -0x1(%rax),%r9d
   1b754:	85 c0                	test   %eax,%eax
   1b756:	75 0e                	jne    1b766 <lua_close@@LUA_5.4+0x4c56>
   1b758:	49 8b 47 10          	mov    0x10(%r15),%rax
   1b75c:	48 29 d8             	sub    %rbx,%rax
   1b75f:	48 c1 f8 04          	sar    $0x4,%rax
   1b763:	41 89 c1             	mov    %eax,%r9d
   1b766:	4c 89 6d 20          	mov    %r13,0x20(%rbp)
   1b76a:	41 f7 c4 00 80 00 00 	test   $0x8000,%r12d
   1b771:	74 44                	je     1b7b7 <lua_close@@LUA_5.4+0x4ca7>
   1b773:	44 89 4d 38          	mov    %r9d,0x38(%rbp)
   1b777:	48 8b 45 08          	mov    0x8(%rbp),%rax
   1b77b:	49 39 47 10          	cmp    %rax,0x10(%r15)
   1b77f:	73 04                	jae    1b785 <lua_close@@LUA_5.4+0x4c75>
   1b781:	49 89 47 10          	mov    %rax,0x10(%r15)
   1b785:	b9 01 00 00 00       	mov    $0x1,%ecx
   1b78a:	ba ff ff ff ff       	mov    $0xffffffff,%edx
   1b78f:	4c 89 d6             	mov    %r10,%rsi
   1b792:	4c 89 ff             	mov    %r15,%rdi
   1b795:	44 89 4c 24 08       	mov    %r9d,0x8(%rsp)
   1b79a:	44 89 04 24          	mov    %r8d,(%rsp)
   1b79e:	e8 ad 3b ff ff       	call   f350 <lua_yieldk@@LUA_5.4+0xde0>
   1b7a3:	8b 45 28             	mov    0x28(%rbp),%eax
   1b7a6:	44 8b 04 24          	mov    (%rsp),%r8d
   1b7aa:	44 8b 4c 24 08       	mov    0x8(%rsp),%r9d
   1b7af:	85 c0                	test   %eax,%eax
   1b7b1:	0f 85 17 30 00 00    	jne    1e7ce <lua_close@@LUA_5.4+0x7cbe>
   1b7b7:	45 85 c0             	test   %r8d,%r8d
   1b7ba:	74 0f                	je     1b7cb <lua_close@@LUA_5.4+0x4cbb>
   1b7bc:	44 03 45 2c          	add    0x2c(%rbp),%r8d
   1b7c0:	49 63 c0             	movslq %r8d,%rax
   1b7c3:	48 c1 e0 04          	shl    $0x4,%rax
   1b7c7:	48 29 45 00          	sub    %rax,0x0(%rbp)
   1b7cb:	49 63 c1             	movslq %r9d,%rax
   1b7ce:	44 89 ca             	mov    %r9d,%edx
   1b7d1:	48 89 ee             	mov    %rbp,%rsi
   1b7d4:	4c 89 ff             	mov    %r15,%rdi
   1b7d7:	48 c1 e0 04          	shl    $0x4,%rax
   1b7db:	48 01 d8             	add    %rbx,%rax
   1b7de:	49 89 47 10          	mov    %rax,0x10(%r15)
   1b7e2:	e8 59 21 ff ff       	call   d940 <lua_getinfo@@LUA_5.4+0x1480>
   1b7e7:	44 8b 45 28          	mov    0x28(%rbp),%r8d
   1b7eb:	f6 45 3e 04          	testb  $0x4,0x3e(%rbp)
   1b7ef:	0f 85 8f 00 00 00    	jne    1b884 <lua_close@@LUA_5.4+0x4d74>
   1b7f5:	48 8b 6d 10          	mov    0x10(%rbp),%rbp
   1b7f9:	e9 da fb ff ff       	jmp    1b3d8 <lua_close@@LUA_5.4+0x48c8>
   1b7fe:	66 90                	xchg   %ax,%ax
   1b800:	44 89 e0             	mov    %r12d,%eax
   1b803:	45 31 c0             	xor    %r8d,%r8d
   1b806:	c1 e8 10             	shr    $0x10,%eax
   1b809:	0f b6 d0             	movzbl %al,%edx
   1b80c:	44 89 e0             	mov    %r12d,%eax
   1b80f:	c1 e8 18             	shr    $0x18,%eax
   1b812:	74 06                	je     1b81a <lua_close@@LUA_5.4+0x4d0a>
   1b814:	03 45 2c             	add    0x2c(%rbp),%eax
   1b817:	41 89 c0             	mov    %eax,%r8d
   1b81a:	85 d2                	test   %edx,%edx
   1b81c:	0f 84 4a 1e 00 00    	je     1d66c <lua_close@@LUA_5.4+0x6b5c>
   1b822:	89 d0                	mov    %edx,%eax
   1b824:	48 89 c1             	mov    %rax,%rcx
   1b827:	48 c1 e0 04          	shl    $0x4,%rax
   1b82b:	48 01 d8             	add    %rbx,%rax
   1b82e:	41 81 e4 00 80 00 00 	and    $0x8000,%r12d
   1b835:	49 89 47 10          	mov    %rax,0x10(%r15)
   1b839:	4c 89 6d 20          	mov    %r13,0x20(%rbp)
   1b83d:	0f 85 47 1e 00 00    	jne    1d68a <lua_close@@LUA_5.4+0x6b7a>
   1b843:	48 89 da             	mov    %rbx,%rdx
   1b846:	48 89 ee             	mov    %rbp,%rsi
   1b849:	4c 89 ff             	mov    %r15,%rdi
   1b84c:	44 89 04 24          	mov    %r8d,(%rsp)
   1b850:	e8 fb 23 ff ff       	call   dc50 <lua_getinfo@@LUA_5.4+0x1790>
   1b855:	89 c2                	mov    %eax,%edx
   1b857:	85 c0                	test   %eax,%eax
   1b859:	0f 88 e8 30 00 00    	js     1e947 <lua_close@@LUA_5.4+0x7e37>
   1b85f:	4c 63 04 24          	movslq (%rsp),%r8
   1b863:	48 89 ee             	mov    %rbp,%rsi
   1b866:	4c 89 ff             	mov    %r15,%rdi
   1b869:	49 c1 e0 04          	shl    $0x4,%r8
   1b86d:	4c 29 45 00          	sub    %r8,0x0(%rbp)
   1b871:	e8 ca 20 ff ff       	call   d940 <lua_getinfo@@LUA_5.4+0x1480>
   1b876:	44 8b 45 28          	mov    0x28(%rbp),%r8d
   1b87a:	f6 45 3e 04          	testb  $0x4,0x3e(%rbp)
   1b87e:	0f 84 71 ff ff ff    	je     1b7f5 <lua_close@@LUA_5.4+0x4ce5>
   1b884:	48 8b 44 24 58       	mov    0x58(%rsp),%rax
   1b889:	64 48 2b 04 25 28 00 	sub    %fs:0x28,%rax
   1b890:	00 00 
   1b892:	0f 85 6d 36 00 00    	jne    1ef05 <lua_close@@LUA_5.4+0x83f5>
   1b898:	48 83 c4 68          	add    $0x68,%rsp
   1b89c:	5b                   	pop    %rbx
   1b89d:	5d                   	pop    %rbp
   1b89e:	41 5c                	pop    %r12
   1b8a0:	41 5d                	pop    %r13
   1b8a2:	41 5e                	pop    %r14
   1b8a4:	41 5f                	pop    %r15
   1b8a6:	c3                   	ret
   1b8a7:	66 0f 1f 84 00 00 00 	nopw   0x0(%rax,%rax,1)
   1b8ae:	00 00 
   1b8b0:	48 8b 45 08          	mov    0x8(%rbp),%rax
   1b8b4:	4c 89 6d 20          	mov    %r13,0x20(%rbp)
   1b8b8:	48 89 de             	mov    %rbx,%rsi
   1b8bb:	4c 89 ff             	mov    %r15,%rdi
   1b8be:	44 89 44 24 18       	mov    %r8d,0x18(%rsp)
   1b8c3:	4c 89 eb             	mov    %r13,%rbx
   1b8c6:	49 89 47 10          	mov    %rax,0x10(%r15)
   1b8ca:	4c 89 54 24 10       	mov    %r10,0x10(%rsp)
   1b8cf:	e8 2c e9 ff ff       	call   1a200 <lua_close@@LUA_5.4+0x36f0>
   1b8d4:	4c 8b 54 24 10       	mov    0x10(%rsp),%r10
   1b8d9:	44 8b 44 24 18       	mov    0x18(%rsp),%r8d
   1b8de:	85 c0                	test   %eax,%eax
   1b8e0:	74 0e                	je     1b8f0 <lua_close@@LUA_5.4+0x4de0>
   1b8e2:	41 c1 ec 0f          	shr    $0xf,%r12d
   1b8e6:	41 8d 44 24 01       	lea    0x1(%r12),%eax
   1b8eb:	49 8d 5c 85 00       	lea    0x0(%r13,%rax,4),%rbx
   1b8f0:	45 85 c0             	test   %r8d,%r8d
   1b8f3:	0f 84 08 fb ff ff    	je     1b401 <lua_close@@LUA_5.4+0x48f1>
   1b8f9:	48 89 de             	mov    %rbx,%rsi
   1b8fc:	4c 89 ff             	mov    %r15,%rdi
   1b8ff:	e8 9c 14 ff ff       	call   cda0 <lua_getinfo@@LUA_5.4+0x8e0>
   1b904:	41 89 c0             	mov    %eax,%r8d
   1b907:	48 8b 45 00          	mov    0x0(%rbp),%rax
   1b90b:	4c 8d 50 10          	lea    0x10(%rax),%r10
   1b90f:	e9 ed fa ff ff       	jmp    1b401 <lua_close@@LUA_5.4+0x48f1>
   1b914:	0f 1f 40 00          	nopl   0x0(%rax)
   1b918:	80 7b 28 03          	cmpb   $0x3,0x28(%rbx)
   1b91c:	0f 85 9b 1d 00 00    	jne    1d6bd <lua_close@@LUA_5.4+0x6bad>
   1b922:	48 8b 43 10          	mov    0x10(%rbx),%rax
   1b926:	48 85 c0             	test   %rax,%rax
   1b929:	74 2b                	je     1b956 <lua_close@@LUA_5.4+0x4e46>
   1b92b:	48 83 e8 01          	sub    $0x1,%rax
   1b92f:	48 8b 53 20          	mov    0x20(%rbx),%rdx
   1b933:	41 c1 ec 0f          	shr    $0xf,%r12d
   1b937:	c6 43 38 03          	movb   $0x3,0x38(%rbx)
   1b93b:	48 89 43 10          	mov    %rax,0x10(%rbx)
   1b93f:	48 8b 03             	mov    (%rbx),%rax
   1b942:	48 01 d0             	add    %rdx,%rax
   1b945:	48 89 03             	mov    %rax,(%rbx)
   1b948:	48 89 43 30          	mov    %rax,0x30(%rbx)
   1b94c:	44 89 e0             	mov    %r12d,%eax
   1b94f:	48 c1 e0 02          	shl    $0x2,%rax
   1b953:	49 29 c5             	sub    %rax,%r13
   1b956:	44 8b 45 28          	mov    0x28(%rbp),%r8d
   1b95a:	45 85 c0             	test   %r8d,%r8d
   1b95d:	0f 84 0f fc ff ff    	je     1b572 <lua_close@@LUA_5.4+0x4a62>
   1b963:	4c 89 ee             	mov    %r13,%rsi
   1b966:	4c 89 ff             	mov    %r15,%rdi
   1b969:	e8 32 14 ff ff       	call   cda0 <lua_getinfo@@LUA_5.4+0x8e0>
   1b96e:	41 89 c0             	mov    %eax,%r8d
   1b971:	48 8b 45 00          	mov    0x0(%rbp),%rax
   1b975:	4c 8d 50 10          	lea    0x10(%rax),%r10
   1b979:	e9 f4 fb ff ff       	jmp    1b572 <lua_close@@LUA_5.4+0x4a62>
   1b97e:	66 90                	xchg   %ax,%ax
   1b980:	0f b6 53 08          	movzbl 0x8(%rbx),%edx
   1b984:	31 c0                	xor    %eax,%eax
   1b986:	80 fa 01             	cmp    $0x1,%dl
   1b989:	74 0d                	je     1b998 <lua_close@@LUA_5.4+0x4e88>
   1b98b:	31 c0                	xor    %eax,%eax
   1b98d:	83 e2 0f             	and    $0xf,%edx
   1b990:	0f 95 c0             	setne  %al
   1b993:	0f 1f 44 00 00       	nopl   0x0(%rax,%rax,1)
   1b998:	41 c1 ec 0f          	shr    $0xf,%r12d
   1b99c:	41 83 e4 01          	and    $0x1,%r12d
   1b9a0:	41 39 c4             	cmp    %eax,%r12d
   1b9a3:	0f 84 17 03 00 00    	je     1bcc0 <lua_close@@LUA_5.4+0x51b0>
   1b9a9:	49 8d 5d 04          	lea    0x4(%r13),%rbx
   1b9ad:	e9 3e ff ff ff       	jmp    1b8f0 <lua_close@@LUA_5.4+0x4de0>
   1b9b2:	66 0f 1f 44 00 00    	nopw   0x0(%rax,%rax,1)
   1b9b8:	44 89 e0             	mov    %r12d,%eax
   1b9bb:	c1 e8 10             	shr    $0x10,%eax
   1b9be:	0f b6 c0             	movzbl %al,%eax
   1b9c1:	8d 50 81             	lea    -0x7f(%rax),%edx
   1b9c4:	0f b6 43 08          	movzbl 0x8(%rbx),%eax
   1b9c8:	3c 03                	cmp    $0x3,%al
   1b9ca:	0f 84 1c 1e 00 00    	je     1d7ec <lua_close@@LUA_5.4+0x6cdc>
   1b9d0:	3c 13                	cmp    $0x13,%al
   1b9d2:	0f 85 44 22 00 00    	jne    1dc1c <lua_close@@LUA_5.4+0x710c>
   1b9d8:	66 0f ef c0          	pxor   %xmm0,%xmm0
   1b9dc:	f2 0f 10 0b          	movsd  (%rbx),%xmm1
   1b9e0:	31 c0                	xor    %eax,%eax
   1b9e2:	f2 0f 2a c2          	cvtsi2sd %edx,%xmm0
   1b9e6:	66 0f 2f c8          	comisd %xmm0,%xmm1
   1b9ea:	0f 93 c0             	setae  %al
   1b9ed:	eb a9                	jmp    1b998 <lua_close@@LUA_5.4+0x4e88>
   1b9ef:	90                   	nop
   1b9f0:	44 89 e0             	mov    %r12d,%eax
   1b9f3:	44 89 e2             	mov    %r12d,%edx
   1b9f6:	48 8b 33             	mov    (%rbx),%rsi
   1b9f9:	c1 e8 10             	shr    $0x10,%eax
   1b9fc:	c1 ea 18             	shr    $0x18,%edx
   1b9ff:	25 ff 00 00 00       	and    $0xff,%eax
   1ba04:	0f 85 53 1c 00 00    	jne    1d65d <lua_close@@LUA_5.4+0x6b4d>
   1ba0a:	49 8b 4f 10          	mov    0x10(%r15),%rcx
   1ba0e:	48 29 d9             	sub    %rbx,%rcx
   1ba11:	48 c1 f9 04          	sar    $0x4,%rcx
   1ba15:	83 e9 01             	sub    $0x1,%ecx
   1ba18:	89 c8                	mov    %ecx,%eax
   1ba1a:	01 c2                	add    %eax,%edx
   1ba1c:	49 8d 45 04          	lea    0x4(%r13),%rax
   1ba20:	41 81 e4 00 80 00 00 	and    $0x8000,%r12d
   1ba27:	48 89 44 24 10       	mov    %rax,0x10(%rsp)
   1ba2c:	0f 84 21 1c 00 00    	je     1d653 <lua_close@@LUA_5.4+0x6b43>
   1ba32:	41 8b 45 00          	mov    0x0(%r13),%eax
   1ba36:	c1 e8 07             	shr    $0x7,%eax
   1ba39:	c1 e0 08             	shl    $0x8,%eax
   1ba3c:	01 c2                	add    %eax,%edx
   1ba3e:	48 89 f7             	mov    %rsi,%rdi
   1ba41:	44 89 44 24 38       	mov    %r8d,0x38(%rsp)
   1ba46:	4c 89 54 24 30       	mov    %r10,0x30(%rsp)
   1ba4b:	89 54 24 28          	mov    %edx,0x28(%rsp)
   1ba4f:	89 4c 24 20          	mov    %ecx,0x20(%rsp)
   1ba53:	48 89 74 24 18       	mov    %rsi,0x18(%rsp)
   1ba58:	e8 83 bb ff ff       	call   175e0 <lua_close@@LUA_5.4+0xad0>
   1ba5d:	8b 54 24 28          	mov    0x28(%rsp),%edx
   1ba61:	48 8b 74 24 18       	mov    0x18(%rsp),%rsi
   1ba66:	8b 4c 24 20          	mov    0x20(%rsp),%ecx
   1ba6a:	4c 8b 54 24 30       	mov    0x30(%rsp),%r10
   1ba6f:	39 d0                	cmp    %edx,%eax
   1ba71:	44 8b 44 24 38       	mov    0x38(%rsp),%r8d
   1ba76:	0f 82 be 20 00 00    	jb     1db3a <lua_close@@LUA_5.4+0x702a>
   1ba7c:	4c 63 e1             	movslq %ecx,%r12
   1ba7f:	41 89 d5             	mov    %edx,%r13d
   1ba82:	49 c1 e4 04          	shl    $0x4,%r12
   1ba86:	41 29 cd             	sub    %ecx,%r13d
   1ba89:	85 c9                	test   %ecx,%ecx
   1ba8b:	7e 64                	jle    1baf1 <lua_close@@LUA_5.4+0x4fe1>
   1ba8d:	48 89 6c 24 18       	mov    %rbp,0x18(%rsp)
   1ba92:	4c 89 ff             	mov    %r15,%rdi
   1ba95:	48 89 dd             	mov    %rbx,%rbp
   1ba98:	45 89 ef             	mov    %r13d,%r15d
   1ba9b:	89 d3                	mov    %edx,%ebx
   1ba9d:	49 89 f5             	mov    %rsi,%r13
   1baa0:	4a 8d 54 25 00       	lea    0x0(%rbp,%r12,1),%rdx
   1baa5:	8d 43 ff             	lea    -0x1(%rbx),%eax
   1baa8:	48 8b 32             	mov    (%rdx),%rsi
   1baab:	48 89 c3             	mov    %rax,%rbx
   1baae:	48 c1 e0 04          	shl    $0x4,%rax
   1bab2:	49 03 45 10          	add    0x10(%r13),%rax
   1bab6:	48 89 30             	mov    %rsi,(%rax)
   1bab9:	0f b6 72 08          	movzbl 0x8(%rdx),%esi
   1babd:	40 88 70 08          	mov    %sil,0x8(%rax)
   1bac1:	83 e6 40             	and    $0x40,%esi
   1bac4:	74 1a                	je     1bae0 <lua_close@@LUA_5.4+0x4fd0>
   1bac6:	41 f6 45 09 20       	testb  $0x20,0x9(%r13)
   1bacb:	74 13                	je     1bae0 <lua_close@@LUA_5.4+0x4fd0>
   1bacd:	48 8b 02             	mov    (%rdx),%rax
   1bad0:	f6 40 09 18          	testb  $0x18,0x9(%rax)
   1bad4:	0f 85 ce 1a 00 00    	jne    1d5a8 <lua_close@@LUA_5.4+0x6a98>
   1bada:	66 0f 1f 44 00 00    	nopw   0x0(%rax,%rax,1)
   1bae0:	49 83 ec 10          	sub    $0x10,%r12
   1bae4:	44 39 fb             	cmp    %r15d,%ebx
   1bae7:	75 b7                	jne    1baa0 <lua_close@@LUA_5.4+0x4f90>
   1bae9:	48 8b 6c 24 18       	mov    0x18(%rsp),%rbp
   1baee:	49 89 ff             	mov    %rdi,%r15
   1baf1:	45 85 c0             	test   %r8d,%r8d
   1baf4:	0f 85 c2 27 00 00    	jne    1e2bc <lua_close@@LUA_5.4+0x77ac>
   1bafa:	48 8b 44 24 10       	mov    0x10(%rsp),%rax
   1baff:	4c 8d 68 04          	lea    0x4(%rax),%r13
   1bb03:	e9 98 f9 ff ff       	jmp    1b4a0 <lua_close@@LUA_5.4+0x4990>
   1bb08:	0f 1f 84 00 00 00 00 	nopl   0x0(%rax,%rax,1)
   1bb0f:	00 
   1bb10:	44 89 e0             	mov    %r12d,%eax
   1bb13:	41 c1 ec 18          	shr    $0x18,%r12d
   1bb17:	c1 e8 10             	shr    $0x10,%eax
   1bb1a:	41 8d 54 24 ff       	lea    -0x1(%r12),%edx
   1bb1f:	25 ff 00 00 00       	and    $0xff,%eax
   1bb24:	74 0d                	je     1bb33 <lua_close@@LUA_5.4+0x5023>
   1bb26:	89 c0                	mov    %eax,%eax
   1bb28:	48 c1 e0 04          	shl    $0x4,%rax
   1bb2c:	48 01 d8             	add    %rbx,%rax
   1bb2f:	49 89 47 10          	mov    %rax,0x10(%r15)
   1bb33:	4c 89 6d 20          	mov    %r13,0x20(%rbp)
   1bb37:	48 89 de             	mov    %rbx,%rsi
   1bb3a:	4c 89 ff             	mov    %r15,%rdi
   1bb3d:	4c 89 54 24 10       	mov    %r10,0x10(%rsp)
   1bb42:	e8 c9 23 ff ff       	call   df10 <lua_getinfo@@LUA_5.4+0x1a50>
   1bb47:	48 85 c0             	test   %rax,%rax
   1bb4a:	0f 84 b8 fa ff ff    	je     1b608 <lua_close@@LUA_5.4+0x4af8>
   1bb50:	49 89 c5             	mov    %rax,%r13
   1bb53:	e9 73 f8 ff ff       	jmp    1b3cb <lua_close@@LUA_5.4+0x48bb>
   1bb58:	0f 1f 84 00 00 00 00 	nopl   0x0(%rax,%rax,1)
   1bb5f:	00 
   1bb60:	41 8b 87 c0 00 00 00 	mov    0xc0(%r15),%eax
   1bb67:	85 c0                	test   %eax,%eax
   1bb69:	0f 85 d5 23 00 00    	jne    1df44 <lua_close@@LUA_5.4+0x7434>
   1bb6f:	48 8b 55 10          	mov    0x10(%rbp),%rdx
   1bb73:	0f bf 45 3c          	movswl 0x3c(%rbp),%eax
   1bb77:	49 89 57 20          	mov    %rdx,0x20(%r15)
   1bb7b:	49 8d 52 f0          	lea    -0x10(%r10),%rdx
   1bb7f:	85 c0                	test   %eax,%eax
   1bb81:	0f 85 ed 20 00 00    	jne    1dc74 <lua_close@@LUA_5.4+0x7164>
   1bb87:	49 89 57 10          	mov    %rdx,0x10(%r15)
   1bb8b:	e9 5b fc ff ff       	jmp    1b7eb <lua_close@@LUA_5.4+0x4cdb>
   1bb90:	41 8b 87 c0 00 00 00 	mov    0xc0(%r15),%eax
   1bb97:	85 c0                	test   %eax,%eax
   1bb99:	0f 85 03 27 00 00    	jne    1e2a2 <lua_close@@LUA_5.4+0x7792>
   1bb9f:	48 8b 45 10          	mov    0x10(%rbp),%rax
   1bba3:	49 8d 4a f0          	lea    -0x10(%r10),%rcx
   1bba7:	49 89 4f 10          	mov    %rcx,0x10(%r15)
   1bbab:	49 89 47 20          	mov    %rax,0x20(%r15)
   1bbaf:	48 0f bf 45 3c       	movswq 0x3c(%rbp),%rax
   1bbb4:	48 89 c2             	mov    %rax,%rdx
   1bbb7:	85 c0                	test   %eax,%eax
   1bbb9:	0f 8e 2c fc ff ff    	jle    1b7eb <lua_close@@LUA_5.4+0x4cdb>
   1bbbf:	8d 70 ff             	lea    -0x1(%rax),%esi
   1bbc2:	49 83 ea 08          	sub    $0x8,%r10
   1bbc6:	48 89 f0             	mov    %rsi,%rax
   1bbc9:	48 c1 e6 04          	shl    $0x4,%rsi
   1bbcd:	48 8d 74 31 18       	lea    0x18(%rcx,%rsi,1),%rsi
   1bbd2:	41 c6 02 00          	movb   $0x0,(%r10)
   1bbd6:	49 83 c2 10          	add    $0x10,%r10
   1bbda:	4c 39 d6             	cmp    %r10,%rsi
   1bbdd:	75 f3                	jne    1bbd2 <lua_close@@LUA_5.4+0x50c2>
   1bbdf:	48 c1 e2 04          	shl    $0x4,%rdx
   1bbe3:	48 98                	cltq
   1bbe5:	48 01 ca             	add    %rcx,%rdx
   1bbe8:	48 c1 e0 04          	shl    $0x4,%rax
   1bbec:	49 89 57 10          	mov    %rdx,0x10(%r15)
   1bbf0:	c6 44 01 08 00       	movb   $0x0,0x8(%rcx,%rax,1)
   1bbf5:	e9 f1 fb ff ff       	jmp    1b7eb <lua_close@@LUA_5.4+0x4cdb>
   1bbfa:	66 0f 1f 44 00 00    	nopw   0x0(%rax,%rax,1)
   1bc00:	44 89 e0             	mov    %r12d,%eax
   1bc03:	c1 e8 10             	shr    $0x10,%eax
   1bc06:	0f b6 c0             	movzbl %al,%eax
   1bc09:	8d 50 81             	lea    -0x7f(%rax),%edx
   1bc0c:	0f b6 43 08          	movzbl 0x8(%rbx),%eax
   1bc10:	3c 03                	cmp    $0x3,%al
   1bc12:	0f 84 d5 1e 00 00    	je     1daed <lua_close@@LUA_5.4+0x6fdd>
   1bc18:	3c 13                	cmp    $0x13,%al
   1bc1a:	0f 85 7f 1f 00 00    	jne    1db9f <lua_close@@LUA_5.4+0x708f>
   1bc20:	66 0f ef c0          	pxor   %xmm0,%xmm0
   1bc24:	f2 0f 10 0b          	movsd  (%rbx),%xmm1
   1bc28:	31 c0                	xor    %eax,%eax
   1bc2a:	f2 0f 2a c2          	cvtsi2sd %edx,%xmm0
   1bc2e:	66 0f 2f c8          	comisd %xmm0,%xmm1
   1bc32:	0f 97 c0             	seta   %al
   1bc35:	e9 5e fd ff ff       	jmp    1b998 <lua_close@@LUA_5.4+0x4e88>
   1bc3a:	66 0f 1f 44 00 00    	nopw   0x0(%rax,%rax,1)
   1bc40:	44 89 e0             	mov    %r12d,%eax
   1bc43:	c1 e8 10             	shr    $0x10,%eax
   1bc46:	0f b6 c0             	movzbl %al,%eax
   1bc49:	8d 50 81             	lea    -0x7f(%rax),%edx
   1bc4c:	0f b6 43 08          	movzbl 0x8(%rbx),%eax
   1bc50:	3c 03                	cmp    $0x3,%al
   1bc52:	0f 84 a5 1b 00 00    	je     1d7fd <lua_close@@LUA_5.4+0x6ced>
   1bc58:	3c 13                	cmp    $0x13,%al
   1bc5a:	0f 85 97 1f 00 00    	jne    1dbf7 <lua_close@@LUA_5.4+0x70e7>
   1bc60:	66 0f ef c0          	pxor   %xmm0,%xmm0
   1bc64:	31 c0                	xor    %eax,%eax
   1bc66:	f2 0f 2a c2          	cvtsi2sd %edx,%xmm0
   1bc6a:	66 0f 2f 03          	comisd (%rbx),%xmm0
   1bc6e:	0f 93 c0             	setae  %al
   1bc71:	e9 22 fd ff ff       	jmp    1b998 <lua_close@@LUA_5.4+0x4e88>
   1bc76:	66 2e 0f 1f 84 00 00 	cs nopw 0x0(%rax,%rax,1)
   1bc7d:	00 00 00 
   1bc80:	44 89 e0             	mov    %r12d,%eax
   1bc83:	b9 01 00 00 00       	mov    $0x1,%ecx
   1bc88:	c1 e8 10             	shr    $0x10,%eax
   1bc8b:	0f b6 c0             	movzbl %al,%eax
   1bc8e:	48 c1 e0 04          	shl    $0x4,%rax
   1bc92:	4c 01 d0             	add    %r10,%rax
   1bc95:	0f b6 50 08          	movzbl 0x8(%rax),%edx
   1bc99:	80 fa 01             	cmp    $0x1,%dl
   1bc9c:	74 06                	je     1bca4 <lua_close@@LUA_5.4+0x5194>
   1bc9e:	f6 c2 0f             	test   $0xf,%dl
   1bca1:	0f 94 c1             	sete   %cl
   1bca4:	41 c1 ec 0f          	shr    $0xf,%r12d
   1bca8:	41 83 e4 01          	and    $0x1,%r12d
   1bcac:	41 38 cc             	cmp    %cl,%r12b
   1bcaf:	0f 84 f4 fc ff ff    	je     1b9a9 <lua_close@@LUA_5.4+0x4e99>
   1bcb5:	48 8b 00             	mov    (%rax),%rax
   1bcb8:	88 53 08             	mov    %dl,0x8(%rbx)
   1bcbb:	48 89 03             	mov    %rax,(%rbx)
   1bcbe:	66 90                	xchg   %ax,%ax
   1bcc0:	41 8b 45 00          	mov    0x0(%r13),%eax
   1bcc4:	44 8b 45 28          	mov    0x28(%rbp),%r8d
   1bcc8:	c1 e8 07             	shr    $0x7,%eax
   1bccb:	49 8d 9c 85 08 00 00 	lea    -0x3fffff8(%r13,%rax,4),%rbx
   1bcd2:	fc 
   1bcd3:	e9 18 fc ff ff       	jmp    1b8f0 <lua_close@@LUA_5.4+0x4de0>
   1bcd8:	0f 1f 84 00 00 00 00 	nopl   0x0(%rax,%rax,1)
   1bcdf:	00 
   1bce0:	44 89 e0             	mov    %r12d,%eax
   1bce3:	c1 e8 10             	shr    $0x10,%eax
   1bce6:	0f b6 c0             	movzbl %al,%eax
   1bce9:	8d 50 81             	lea    -0x7f(%rax),%edx
   1bcec:	0f b6 43 08          	movzbl 0x8(%rbx),%eax
   1bcf0:	3c 03                	cmp    $0x3,%al
   1bcf2:	0f 84 62 1c 00 00    	je     1d95a <lua_close@@LUA_5.4+0x6e4a>
   1bcf8:	3c 13                	cmp    $0x13,%al
   1bcfa:	0f 85 66 1e 00 00    	jne    1db66 <lua_close@@LUA_5.4+0x7056>
   1bd00:	66 0f ef c0          	pxor   %xmm0,%xmm0
   1bd04:	31 c0                	xor    %eax,%eax
   1bd06:	f2 0f 2a c2          	cvtsi2sd %edx,%xmm0
   1bd0a:	66 0f 2f 03          	comisd (%rbx),%xmm0
   1bd0e:	0f 97 c0             	seta   %al
   1bd11:	e9 82 fc ff ff       	jmp    1b998 <lua_close@@LUA_5.4+0x4e88>
   1bd16:	66 2e 0f 1f 84 00 00 	cs nopw 0x0(%rax,%rax,1)
   1bd1d:	00 00 00 
   1bd20:	44 89 e0             	mov    %r12d,%eax
   1bd23:	0f b6 53 08          	movzbl 0x8(%rbx),%edx
   1bd27:	c1 e8 10             	shr    $0x10,%eax
   1bd2a:	0f b6 c0             	movzbl %al,%eax
   1bd2d:	83 e8 7f             	sub    $0x7f,%eax
   1bd30:	80 fa 03             	cmp    $0x3,%dl
   1bd33:	0f 84 32 1c 00 00    	je     1d96b <lua_close@@LUA_5.4+0x6e5b>
   1bd39:	31 c9                	xor    %ecx,%ecx
   1bd3b:	80 fa 13             	cmp    $0x13,%dl
   1bd3e:	75 14                	jne    1bd54 <lua_close@@LUA_5.4+0x5244>
   1bd40:	66 0f ef c0          	pxor   %xmm0,%xmm0
   1bd44:	f2 0f 2a c0          	cvtsi2sd %eax,%xmm0
   1bd48:	31 c0                	xor    %eax,%eax
   1bd4a:	66 0f 2e 03          	ucomisd (%rbx),%xmm0
   1bd4e:	0f 9b c0             	setnp  %al
   1bd51:	0f 44 c8             	cmove  %eax,%ecx
   1bd54:	41 c1 ec 0f          	shr    $0xf,%r12d
   1bd58:	41 83 e4 01          	and    $0x1,%r12d
   1bd5c:	41 39 cc             	cmp    %ecx,%r12d
   1bd5f:	0f 85 44 fc ff ff    	jne    1b9a9 <lua_close@@LUA_5.4+0x4e99>
   1bd65:	e9 56 ff ff ff       	jmp    1bcc0 <lua_close@@LUA_5.4+0x51b0>
   1bd6a:	66 0f 1f 44 00 00    	nopw   0x0(%rax,%rax,1)
   1bd70:	44 89 e2             	mov    %r12d,%edx
   1bd73:	48 8b 04 24          	mov    (%rsp),%rax
   1bd77:	31 ff                	xor    %edi,%edi
   1bd79:	41 c1 ec 0f          	shr    $0xf,%r12d
   1bd7d:	c1 ea 10             	shr    $0x10,%edx
   1bd80:	48 89 de             	mov    %rbx,%rsi
   1bd83:	4c 89 54 24 10       	mov    %r10,0x10(%rsp)
   1bd88:	41 83 e4 01          	and    $0x1,%r12d
   1bd8c:	0f b6 d2             	movzbl %dl,%edx
   1bd8f:	44 89 44 24 18       	mov    %r8d,0x18(%rsp)
   1bd94:	48 c1 e2 04          	shl    $0x4,%rdx
   1bd98:	48 01 c2             	add    %rax,%rdx
   1bd9b:	e8 10 ef ff ff       	call   1acb0 <lua_close@@LUA_5.4+0x41a0>
   1bda0:	4c 8b 54 24 10       	mov    0x10(%rsp),%r10
   1bda5:	41 39 c4             	cmp    %eax,%r12d
   1bda8:	0f 84 12 ff ff ff    	je     1bcc0 <lua_close@@LUA_5.4+0x51b0>
   1bdae:	44 8b 44 24 18       	mov    0x18(%rsp),%r8d
   1bdb3:	49 8d 5d 04          	lea    0x4(%r13),%rbx
   1bdb7:	e9 34 fb ff ff       	jmp    1b8f0 <lua_close@@LUA_5.4+0x4de0>
   1bdbc:	0f 1f 40 00          	nopl   0x0(%rax)
   1bdc0:	44 89 e0             	mov    %r12d,%eax
   1bdc3:	c1 e8 10             	shr    $0x10,%eax
   1bdc6:	0f b6 c0             	movzbl %al,%eax
   1bdc9:	48 c1 e0 04          	shl    $0x4,%rax
   1bdcd:	49 8d 14 02          	lea    (%r10,%rax,1),%rdx
   1bdd1:	0f b6 43 08          	movzbl 0x8(%rbx),%eax
   1bdd5:	3c 03                	cmp    $0x3,%al
   1bdd7:	0f 84 13 1b 00 00    	je     1d8f0 <lua_close@@LUA_5.4+0x6de0>
   1bddd:	83 e0 0f             	and    $0xf,%eax
   1bde0:	3c 03                	cmp    $0x3,%al
   1bde2:	0f 84 58 1f 00 00    	je     1dd40 <lua_close@@LUA_5.4+0x7230>
   1bde8:	48 8b 45 08          	mov    0x8(%rbp),%rax
   1bdec:	4c 89 6d 20          	mov    %r13,0x20(%rbp)
   1bdf0:	49 89 47 10          	mov    %rax,0x10(%r15)
   1bdf4:	0f b6 43 08          	movzbl 0x8(%rbx),%eax
   1bdf8:	83 e0 0f             	and    $0xf,%eax
   1bdfb:	3c 04                	cmp    $0x4,%al
   1bdfd:	75 0f                	jne    1be0e <lua_close@@LUA_5.4+0x52fe>
   1bdff:	0f b6 42 08          	movzbl 0x8(%rdx),%eax
   1be03:	83 e0 0f             	and    $0xf,%eax
   1be06:	3c 04                	cmp    $0x4,%al
   1be08:	0f 84 72 24 00 00    	je     1e280 <lua_close@@LUA_5.4+0x7770>
   1be0e:	b9 15 00 00 00       	mov    $0x15,%ecx
   1be13:	48 89 de             	mov    %rbx,%rsi
   1be16:	4c 89 ff             	mov    %r15,%rdi
   1be19:	4c 89 54 24 10       	mov    %r10,0x10(%rsp)
   1be1e:	e8 1d ce ff ff       	call   18c40 <lua_close@@LUA_5.4+0x2130>
   1be23:	4c 8b 54 24 10       	mov    0x10(%rsp),%r10
   1be28:	44 8b 45 28          	mov    0x28(%rbp),%r8d
   1be2c:	e9 67 fb ff ff       	jmp    1b998 <lua_close@@LUA_5.4+0x4e88>
   1be31:	0f 1f 80 00 00 00 00 	nopl   0x0(%rax)
   1be38:	44 89 e0             	mov    %r12d,%eax
   1be3b:	c1 e8 10             	shr    $0x10,%eax
   1be3e:	0f b6 c0             	movzbl %al,%eax
   1be41:	48 c1 e0 04          	shl    $0x4,%rax
   1be45:	49 8d 14 02          	lea    (%r10,%rax,1),%rdx
   1be49:	0f b6 43 08          	movzbl 0x8(%rbx),%eax
   1be4d:	3c 03                	cmp    $0x3,%al
   1be4f:	0f 84 2d 1a 00 00    	je     1d882 <lua_close@@LUA_5.4+0x6d72>
   1be55:	83 e0 0f             	and    $0xf,%eax
   1be58:	3c 03                	cmp    $0x3,%al
   1be5a:	0f 84 e9 1e 00 00    	je     1dd49 <lua_close@@LUA_5.4+0x7239>
   1be60:	48 8b 45 08          	mov    0x8(%rbp),%rax
   1be64:	4c 89 6d 20          	mov    %r13,0x20(%rbp)
   1be68:	49 89 47 10          	mov    %rax,0x10(%r15)
   1be6c:	0f b6 43 08          	movzbl 0x8(%rbx),%eax
   1be70:	83 e0 0f             	and    $0xf,%eax
   1be73:	3c 04                	cmp    $0x4,%al
   1be75:	75 0f                	jne    1be86 <lua_close@@LUA_5.4+0x5376>
   1be77:	0f b6 42 08          	movzbl 0x8(%rdx),%eax
   1be7b:	83 e0 0f             	and    $0xf,%eax
   1be7e:	3c 04                	cmp    $0x4,%al
   1be80:	0f 84 54 20 00 00    	je     1deda <lua_close@@LUA_5.4+0x73ca>
   1be86:	b9 14 00 00 00       	mov    $0x14,%ecx
   1be8b:	48 89 de             	mov    %rbx,%rsi
   1be8e:	4c 89 ff             	mov    %r15,%rdi
   1be91:	4c 89 54 24 10       	mov    %r10,0x10(%rsp)
   1be96:	e8 a5 cd ff ff       	call   18c40 <lua_close@@LUA_5.4+0x2130>
   1be9b:	4c 8b 54 24 10       	mov    0x10(%rsp),%r10
   1bea0:	eb 86                	jmp    1be28 <lua_close@@LUA_5.4+0x5318>
   1bea2:	66 0f 1f 44 00 00    	nopw   0x0(%rax,%rax,1)
   1bea8:	48 8b 45 08          	mov    0x8(%rbp),%rax
   1beac:	44 89 e2             	mov    %r12d,%edx
   1beaf:	4c 89 6d 20          	mov    %r13,0x20(%rbp)
   1beb3:	41 c1 ec 0f          	shr    $0xf,%r12d
   1beb7:	c1 ea 10             	shr    $0x10,%edx
   1beba:	48 89 de             	mov    %rbx,%rsi
   1bebd:	4c 89 ff             	mov    %r15,%rdi
   1bec0:	4c 89 54 24 10       	mov    %r10,0x10(%rsp)
   1bec5:	49 89 47 10          	mov    %rax,0x10(%r15)
   1bec9:	0f b6 d2             	movzbl %dl,%edx
   1becc:	41 83 e4 01          	and    $0x1,%r12d
   1bed0:	48 c1 e2 04          	shl    $0x4,%rdx
   1bed4:	4c 01 d2             	add    %r10,%rdx
   1bed7:	e8 d4 ed ff ff       	call   1acb0 <lua_close@@LUA_5.4+0x41a0>
   1bedc:	44 8b 45 28          	mov    0x28(%rbp),%r8d
   1bee0:	4c 8b 54 24 10       	mov    0x10(%rsp),%r10
   1bee5:	41 39 c4             	cmp    %eax,%r12d
   1bee8:	0f 85 bb fa ff ff    	jne    1b9a9 <lua_close@@LUA_5.4+0x4e99>
   1beee:	e9 cd fd ff ff       	jmp    1bcc0 <lua_close@@LUA_5.4+0x51b0>
   1bef3:	0f 1f 44 00 00       	nopl   0x0(%rax,%rax,1)
   1bef8:	41 c1 ec 07          	shr    $0x7,%r12d
   1befc:	44 8b 45 28          	mov    0x28(%rbp),%r8d
   1bf00:	41 8d 84 24 01 00 00 	lea    -0xffffff(%r12),%eax
   1bf07:	ff 
   1bf08:	48 98                	cltq
   1bf0a:	49 8d 5c 85 00       	lea    0x0(%r13,%rax,4),%rbx
   1bf0f:	45 85 c0             	test   %r8d,%r8d
   1bf12:	0f 84 e9 f4 ff ff    	je     1b401 <lua_close@@LUA_5.4+0x48f1>
   1bf18:	e9 dc f9 ff ff       	jmp    1b8f9 <lua_close@@LUA_5.4+0x4de9>
   1bf1d:	0f 1f 00             	nopl   (%rax)
   1bf20:	48 8b 45 08          	mov    0x8(%rbp),%rax
   1bf24:	4c 89 6d 20          	mov    %r13,0x20(%rbp)
   1bf28:	48 89 de             	mov    %rbx,%rsi
   1bf2b:	4c 89 ff             	mov    %r15,%rdi
   1bf2e:	44 89 44 24 18       	mov    %r8d,0x18(%rsp)
   1bf33:	49 89 47 10          	mov    %rax,0x10(%r15)
   1bf37:	4c 89 54 24 10       	mov    %r10,0x10(%rsp)
   1bf3c:	e8 bf 32 ff ff       	call   f200 <lua_yieldk@@LUA_5.4+0xc90>
   1bf41:	44 8b 44 24 18       	mov    0x18(%rsp),%r8d
   1bf46:	4c 8b 54 24 10       	mov    0x10(%rsp),%r10
   1bf4b:	45 85 c0             	test   %r8d,%r8d
   1bf4e:	0f 84 45 f5 ff ff    	je     1b499 <lua_close@@LUA_5.4+0x4989>
   1bf54:	4c 89 ee             	mov    %r13,%rsi
   1bf57:	4c 89 ff             	mov    %r15,%rdi
   1bf5a:	e8 41 0e ff ff       	call   cda0 <lua_getinfo@@LUA_5.4+0x8e0>
   1bf5f:	41 89 c0             	mov    %eax,%r8d
   1bf62:	e9 66 f6 ff ff       	jmp    1b5cd <lua_close@@LUA_5.4+0x4abd>
   1bf67:	66 0f 1f 84 00 00 00 	nopw   0x0(%rax,%rax,1)
   1bf6e:	00 00 
   1bf70:	48 8b 45 08          	mov    0x8(%rbp),%rax
   1bf74:	4c 89 6d 20          	mov    %r13,0x20(%rbp)
   1bf78:	31 d2                	xor    %edx,%edx
   1bf7a:	b9 01 00 00 00       	mov    $0x1,%ecx
   1bf7f:	48 89 de             	mov    %rbx,%rsi
   1bf82:	4c 89 ff             	mov    %r15,%rdi
   1bf85:	4c 89 54 24 10       	mov    %r10,0x10(%rsp)
   1bf8a:	49 89 47 10          	mov    %rax,0x10(%r15)
   1bf8e:	e8 bd 33 ff ff       	call   f350 <lua_yieldk@@LUA_5.4+0xde0>
   1bf93:	44 8b 45 28          	mov    0x28(%rbp),%r8d
   1bf97:	4c 8b 54 24 10       	mov    0x10(%rsp),%r10
   1bf9c:	45 85 c0             	test   %r8d,%r8d
   1bf9f:	0f 84 f4 f4 ff ff    	je     1b499 <lua_close@@LUA_5.4+0x4989>
   1bfa5:	4c 89 ee             	mov    %r13,%rsi
   1bfa8:	4c 89 ff             	mov    %r15,%rdi
   1bfab:	e8 f0 0d ff ff       	call   cda0 <lua_getinfo@@LUA_5.4+0x8e0>
   1bfb0:	41 89 c0             	mov    %eax,%r8d
   1bfb3:	e9 15 f6 ff ff       	jmp    1b5cd <lua_close@@LUA_5.4+0x4abd>
   1bfb8:	0f 1f 84 00 00 00 00 	nopl   0x0(%rax,%rax,1)
   1bfbf:	00 
   1bfc0:	41 c1 ec 10          	shr    $0x10,%r12d
   1bfc4:	41 0f b6 c4          	movzbl %r12b,%eax
   1bfc8:	48 89 c6             	mov    %rax,%rsi
   1bfcb:	48 c1 e0 04          	shl    $0x4,%rax
   1bfcf:	48 01 d8             	add    %rbx,%rax
   1bfd2:	49 89 47 10          	mov    %rax,0x10(%r15)
   1bfd6:	4c 89 6d 20          	mov    %r13,0x20(%rbp)
   1bfda:	83 fe 01             	cmp    $0x1,%esi
   1bfdd:	74 12                	je     1bff1 <lua_close@@LUA_5.4+0x54e1>
   1bfdf:	4c 89 ff             	mov    %r15,%rdi
   1bfe2:	4c 89 54 24 10       	mov    %r10,0x10(%rsp)
   1bfe7:	e8 44 db ff ff       	call   19b30 <lua_close@@LUA_5.4+0x3020>
   1bfec:	4c 8b 54 24 10       	mov    0x10(%rsp),%r10
   1bff1:	49 8b 47 18          	mov    0x18(%r15),%rax
   1bff5:	44 8b 45 28          	mov    0x28(%rbp),%r8d
   1bff9:	48 83 78 18 00       	cmpq   $0x0,0x18(%rax)
   1bffe:	0f 8e 8c f4 ff ff    	jle    1b490 <lua_close@@LUA_5.4+0x4980>
   1c004:	4c 89 6d 20          	mov    %r13,0x20(%rbp)
   1c008:	4c 89 ff             	mov    %r15,%rdi
   1c00b:	4c 89 54 24 10       	mov    %r10,0x10(%rsp)
   1c010:	e8 8b 58 ff ff       	call   118a0 <lua_yieldk@@LUA_5.4+0x3330>
   1c015:	44 8b 45 28          	mov    0x28(%rbp),%r8d
   1c019:	4c 8b 54 24 10       	mov    0x10(%rsp),%r10
   1c01e:	e9 6d f4 ff ff       	jmp    1b490 <lua_close@@LUA_5.4+0x4980>
   1c023:	0f 1f 44 00 00       	nopl   0x0(%rax,%rax,1)
   1c028:	48 8b 45 08          	mov    0x8(%rbp),%rax
   1c02c:	41 c1 ec 10          	shr    $0x10,%r12d
   1c030:	4c 89 6d 20          	mov    %r13,0x20(%rbp)
   1c034:	48 89 de             	mov    %rbx,%rsi
   1c037:	41 0f b6 d4          	movzbl %r12b,%edx
   1c03b:	4c 89 ff             	mov    %r15,%rdi
   1c03e:	4c 89 54 24 10       	mov    %r10,0x10(%rsp)
   1c043:	49 89 47 10          	mov    %rax,0x10(%r15)
   1c047:	48 c1 e2 04          	shl    $0x4,%rdx
   1c04b:	4c 01 d2             	add    %r10,%rdx
   1c04e:	e8 ad ef ff ff       	call   1b000 <lua_close@@LUA_5.4+0x44f0>
   1c053:	44 8b 45 28          	mov    0x28(%rbp),%r8d
   1c057:	4c 8b 54 24 10       	mov    0x10(%rsp),%r10
   1c05c:	45 85 c0             	test   %r8d,%r8d
   1c05f:	0f 84 34 f4 ff ff    	je     1b499 <lua_close@@LUA_5.4+0x4989>
   1c065:	4c 89 ee             	mov    %r13,%rsi
   1c068:	4c 89 ff             	mov    %r15,%rdi
   1c06b:	e8 30 0d ff ff       	call   cda0 <lua_getinfo@@LUA_5.4+0x8e0>
   1c070:	41 89 c0             	mov    %eax,%r8d
   1c073:	e9 55 f5 ff ff       	jmp    1b5cd <lua_close@@LUA_5.4+0x4abd>
   1c078:	0f 1f 84 00 00 00 00 	nopl   0x0(%rax,%rax,1)
   1c07f:	00 
   1c080:	41 c1 ec 10          	shr    $0x10,%r12d
   1c084:	41 0f b6 c4          	movzbl %r12b,%eax
   1c088:	48 c1 e0 04          	shl    $0x4,%rax
   1c08c:	41 0f b6 54 02 08    	movzbl 0x8(%r10,%rax,1),%edx
   1c092:	b8 11 00 00 00       	mov    $0x11,%eax
   1c097:	80 fa 01             	cmp    $0x1,%dl
   1c09a:	74 0e                	je     1c0aa <lua_close@@LUA_5.4+0x559a>
   1c09c:	83 e2 0f             	and    $0xf,%edx
   1c09f:	80 fa 01             	cmp    $0x1,%dl
   1c0a2:	19 c0                	sbb    %eax,%eax
   1c0a4:	83 e0 10             	and    $0x10,%eax
   1c0a7:	83 c0 01             	add    $0x1,%eax
   1c0aa:	88 43 08             	mov    %al,0x8(%rbx)
   1c0ad:	45 85 c0             	test   %r8d,%r8d
   1c0b0:	0f 84 e3 f3 ff ff    	je     1b499 <lua_close@@LUA_5.4+0x4989>
   1c0b6:	4c 89 ee             	mov    %r13,%rsi
   1c0b9:	4c 89 ff             	mov    %r15,%rdi
   1c0bc:	e8 df 0c ff ff       	call   cda0 <lua_getinfo@@LUA_5.4+0x8e0>
   1c0c1:	41 89 c0             	mov    %eax,%r8d
   1c0c4:	e9 04 f5 ff ff       	jmp    1b5cd <lua_close@@LUA_5.4+0x4abd>
   1c0c9:	0f 1f 80 00 00 00 00 	nopl   0x0(%rax)
   1c0d0:	41 c1 ec 10          	shr    $0x10,%r12d
   1c0d4:	41 0f b6 f4          	movzbl %r12b,%esi
   1c0d8:	48 c1 e6 04          	shl    $0x4,%rsi
   1c0dc:	4c 01 d6             	add    %r10,%rsi
   1c0df:	0f b6 46 08          	movzbl 0x8(%rsi),%eax
   1c0e3:	3c 03                	cmp    $0x3,%al
   1c0e5:	0f 85 0c 1e 00 00    	jne    1def7 <lua_close@@LUA_5.4+0x73e7>
   1c0eb:	48 8b 06             	mov    (%rsi),%rax
   1c0ee:	48 f7 d0             	not    %rax
   1c0f1:	c6 43 08 03          	movb   $0x3,0x8(%rbx)
   1c0f5:	48 89 03             	mov    %rax,(%rbx)
   1c0f8:	e9 93 f3 ff ff       	jmp    1b490 <lua_close@@LUA_5.4+0x4980>
   1c0fd:	0f 1f 00             	nopl   (%rax)
   1c100:	41 c1 ec 10          	shr    $0x10,%r12d
   1c104:	41 0f b6 f4          	movzbl %r12b,%esi
   1c108:	48 c1 e6 04          	shl    $0x4,%rsi
   1c10c:	4c 01 d6             	add    %r10,%rsi
   1c10f:	0f b6 46 08          	movzbl 0x8(%rsi),%eax
   1c113:	3c 03                	cmp    $0x3,%al
   1c115:	0f 84 55 17 00 00    	je     1d870 <lua_close@@LUA_5.4+0x6d60>
   1c11b:	3c 13                	cmp    $0x13,%al
   1c11d:	0f 85 a1 1a 00 00    	jne    1dbc4 <lua_close@@LUA_5.4+0x70b4>
   1c123:	f2 0f 10 06          	movsd  (%rsi),%xmm0
   1c127:	66 0f 57 05 51 6f 01 	xorpd  0x16f51(%rip),%xmm0        # 33080 <lua_ident@@LUA_5.4+0xc20>
   1c12e:	00 
   1c12f:	c6 43 08 13          	movb   $0x13,0x8(%rbx)
   1c133:	f2 0f 11 03          	movsd  %xmm0,(%rbx)
   1c137:	e9 54 f3 ff ff       	jmp    1b490 <lua_close@@LUA_5.4+0x4980>
   1c13c:	0f 1f 40 00          	nopl   0x0(%rax)
   1c140:	44 89 e0             	mov    %r12d,%eax
   1c143:	41 c1 ec 18          	shr    $0x18,%r12d
   1c147:	48 8b 3c 24          	mov    (%rsp),%rdi
   1c14b:	c1 e8 10             	shr    $0x10,%eax
   1c14e:	44 89 e2             	mov    %r12d,%edx
   1c151:	0f b6 c0             	movzbl %al,%eax
   1c154:	48 c1 e2 04          	shl    $0x4,%rdx
   1c158:	48 c1 e0 04          	shl    $0x4,%rax
   1c15c:	48 8b 14 17          	mov    (%rdi,%rdx,1),%rdx
   1c160:	4c 01 d0             	add    %r10,%rax
   1c163:	0f b6 48 08          	movzbl 0x8(%rax),%ecx
   1c167:	80 f9 03             	cmp    $0x3,%cl
   1c16a:	0f 85 69 21 00 00    	jne    1e2d9 <lua_close@@LUA_5.4+0x77c9>
   1c170:	48 8b 00             	mov    (%rax),%rax
   1c173:	48 09 c2             	or     %rax,%rdx
   1c176:	c6 43 08 03          	movb   $0x3,0x8(%rbx)
   1c17a:	4d 8d 65 04          	lea    0x4(%r13),%r12
   1c17e:	48 89 13             	mov    %rdx,(%rbx)
   1c181:	0f 1f 80 00 00 00 00 	nopl   0x0(%rax)
   1c188:	45 85 c0             	test   %r8d,%r8d
   1c18b:	75 63                	jne    1c1f0 <lua_close@@LUA_5.4+0x56e0>
   1c18d:	4d 8d 6c 24 04       	lea    0x4(%r12),%r13
   1c192:	45 8b 24 24          	mov    (%r12),%r12d
   1c196:	e9 6d f2 ff ff       	jmp    1b408 <lua_close@@LUA_5.4+0x48f8>
   1c19b:	0f 1f 44 00 00       	nopl   0x0(%rax,%rax,1)
   1c1a0:	44 89 e0             	mov    %r12d,%eax
   1c1a3:	41 c1 ec 18          	shr    $0x18,%r12d
   1c1a7:	48 8b 3c 24          	mov    (%rsp),%rdi
   1c1ab:	c1 e8 10             	shr    $0x10,%eax
   1c1ae:	44 89 e2             	mov    %r12d,%edx
   1c1b1:	0f b6 c0             	movzbl %al,%eax
   1c1b4:	48 c1 e2 04          	shl    $0x4,%rdx
   1c1b8:	48 c1 e0 04          	shl    $0x4,%rax
   1c1bc:	48 8b 14 17          	mov    (%rdi,%rdx,1),%rdx
   1c1c0:	4c 01 d0             	add    %r10,%rax
   1c1c3:	0f b6 48 08          	movzbl 0x8(%rax),%ecx
   1c1c7:	80 f9 03             	cmp    $0x3,%cl
   1c1ca:	0f 85 10 1e 00 00    	jne    1dfe0 <lua_close@@LUA_5.4+0x74d0>
   1c1d0:	48 8b 00             	mov    (%rax),%rax
   1c1d3:	48 21 c2             	and    %rax,%rdx
   1c1d6:	c6 43 08 03          	movb   $0x3,0x8(%rbx)
   1c1da:	4d 8d 65 04          	lea    0x4(%r13),%r12
   1c1de:	48 89 13             	mov    %rdx,(%rbx)
   1c1e1:	45 85 c0             	test   %r8d,%r8d
   1c1e4:	74 a7                	je     1c18d <lua_close@@LUA_5.4+0x567d>
   1c1e6:	66 2e 0f 1f 84 00 00 	cs nopw 0x0(%rax,%rax,1)
   1c1ed:	00 00 00 
   1c1f0:	4c 89 e6             	mov    %r12,%rsi
   1c1f3:	4c 89 ff             	mov    %r15,%rdi
   1c1f6:	e8 a5 0b ff ff       	call   cda0 <lua_getinfo@@LUA_5.4+0x8e0>
   1c1fb:	41 89 c0             	mov    %eax,%r8d
   1c1fe:	48 8b 45 00          	mov    0x0(%rbp),%rax
   1c202:	4c 8d 50 10          	lea    0x10(%rax),%r10
   1c206:	eb 85                	jmp    1c18d <lua_close@@LUA_5.4+0x567d>
   1c208:	0f 1f 84 00 00 00 00 	nopl   0x0(%rax,%rax,1)
   1c20f:	00 
   1c210:	41 8b 4d f8          	mov    -0x8(%r13),%ecx
   1c214:	48 8b 45 08          	mov    0x8(%rbp),%rax
   1c218:	44 89 e2             	mov    %r12d,%edx
   1c21b:	4c 89 6d 20          	mov    %r13,0x20(%rbp)
   1c21f:	c1 ea 10             	shr    $0x10,%edx
   1c222:	45 89 e0             	mov    %r12d,%r8d
   1c225:	48 89 de             	mov    %rbx,%rsi
   1c228:	4c 89 ff             	mov    %r15,%rdi
   1c22b:	c1 e9 07             	shr    $0x7,%ecx
   1c22e:	49 89 47 10          	mov    %rax,0x10(%r15)
   1c232:	0f b6 d2             	movzbl %dl,%edx
   1c235:	41 c1 e8 18          	shr    $0x18,%r8d
   1c239:	0f b6 c9             	movzbl %cl,%ecx
   1c23c:	48 c1 e2 04          	shl    $0x4,%rdx
   1c240:	4c 89 54 24 10       	mov    %r10,0x10(%rsp)
   1c245:	48 c1 e1 04          	shl    $0x4,%rcx
   1c249:	4c 01 d2             	add    %r10,%rdx
   1c24c:	4c 01 d1             	add    %r10,%rcx
   1c24f:	e8 7c c8 ff ff       	call   18ad0 <lua_close@@LUA_5.4+0x1fc0>
   1c254:	44 8b 45 28          	mov    0x28(%rbp),%r8d
   1c258:	4c 8b 54 24 10       	mov    0x10(%rsp),%r10
   1c25d:	45 85 c0             	test   %r8d,%r8d
   1c260:	0f 84 33 f2 ff ff    	je     1b499 <lua_close@@LUA_5.4+0x4989>
   1c266:	4c 89 ee             	mov    %r13,%rsi
   1c269:	4c 89 ff             	mov    %r15,%rdi
   1c26c:	e8 2f 0b ff ff       	call   cda0 <lua_getinfo@@LUA_5.4+0x8e0>
   1c271:	41 89 c0             	mov    %eax,%r8d
   1c274:	e9 54 f3 ff ff       	jmp    1b5cd <lua_close@@LUA_5.4+0x4abd>
   1c279:	0f 1f 80 00 00 00 00 	nopl   0x0(%rax)
   1c280:	45 89 e1             	mov    %r12d,%r9d
   1c283:	41 c1 ec 18          	shr    $0x18,%r12d
   1c287:	41 c1 e9 10          	shr    $0x10,%r9d
   1c28b:	45 0f b6 c9          	movzbl %r9b,%r9d
   1c28f:	49 c1 e1 04          	shl    $0x4,%r9
   1c293:	4d 01 d1             	add    %r10,%r9
   1c296:	41 80 79 08 45       	cmpb   $0x45,0x8(%r9)
   1c29b:	0f 85 bb 12 00 00    	jne    1d55c <lua_close@@LUA_5.4+0x6a4c>
   1c2a1:	49 8b 39             	mov    (%r9),%rdi
   1c2a4:	44 89 e6             	mov    %r12d,%esi
   1c2a7:	48 8d 56 ff          	lea    -0x1(%rsi),%rdx
   1c2ab:	8b 47 0c             	mov    0xc(%rdi),%eax
   1c2ae:	48 39 c2             	cmp    %rax,%rdx
   1c2b1:	0f 83 9b 1a 00 00    	jae    1dd52 <lua_close@@LUA_5.4+0x7242>
   1c2b7:	48 8b 47 10          	mov    0x10(%rdi),%rax
   1c2bb:	48 c1 e6 04          	shl    $0x4,%rsi
   1c2bf:	48 8d 44 30 f0       	lea    -0x10(%rax,%rsi,1),%rax
   1c2c4:	0f b6 50 08          	movzbl 0x8(%rax),%edx
   1c2c8:	f6 c2 0f             	test   $0xf,%dl
   1c2cb:	0f 84 8d 12 00 00    	je     1d55e <lua_close@@LUA_5.4+0x6a4e>
   1c2d1:	48 8b 00             	mov    (%rax),%rax
   1c2d4:	88 53 08             	mov    %dl,0x8(%rbx)
   1c2d7:	48 89 03             	mov    %rax,(%rbx)
   1c2da:	e9 b1 f1 ff ff       	jmp    1b490 <lua_close@@LUA_5.4+0x4980>
   1c2df:	90                   	nop
   1c2e0:	45 89 e1             	mov    %r12d,%r9d
   1c2e3:	41 c1 ec 18          	shr    $0x18,%r12d
   1c2e7:	41 c1 e9 10          	shr    $0x10,%r9d
   1c2eb:	44 89 e2             	mov    %r12d,%edx
   1c2ee:	48 c1 e2 04          	shl    $0x4,%rdx
   1c2f2:	45 0f b6 c9          	movzbl %r9b,%r9d
   1c2f6:	49 c1 e1 04          	shl    $0x4,%r9
   1c2fa:	4c 01 d2             	add    %r10,%rdx
   1c2fd:	4d 01 d1             	add    %r10,%r9
   1c300:	80 7a 08 03          	cmpb   $0x3,0x8(%rdx)
   1c304:	0f 84 70 16 00 00    	je     1d97a <lua_close@@LUA_5.4+0x6e6a>
   1c30a:	31 c9                	xor    %ecx,%ecx
   1c30c:	41 80 79 08 45       	cmpb   $0x45,0x8(%r9)
   1c311:	0f 84 96 1a 00 00    	je     1ddad <lua_close@@LUA_5.4+0x729d>
   1c317:	48 8b 45 08          	mov    0x8(%rbp),%rax
   1c31b:	4c 89 6d 20          	mov    %r13,0x20(%rbp)
   1c31f:	49 89 c8             	mov    %rcx,%r8
   1c322:	48 89 d9             	mov    %rbx,%rcx
   1c325:	4c 89 54 24 10       	mov    %r10,0x10(%rsp)
   1c32a:	49 89 47 10          	mov    %rax,0x10(%r15)
   1c32e:	e9 49 f1 ff ff       	jmp    1b47c <lua_close@@LUA_5.4+0x496c>
   1c333:	0f 1f 44 00 00       	nopl   0x0(%rax,%rax,1)
   1c338:	48 8b 55 08          	mov    0x8(%rbp),%rdx
   1c33c:	41 8b 45 f8          	mov    -0x8(%r13),%eax
   1c340:	4c 89 6d 20          	mov    %r13,0x20(%rbp)
   1c344:	44 89 e1             	mov    %r12d,%ecx
   1c347:	48 8b 3c 24          	mov    (%rsp),%rdi
   1c34b:	c1 e9 0f             	shr    $0xf,%ecx
   1c34e:	45 89 e1             	mov    %r12d,%r9d
   1c351:	48 89 de             	mov    %rbx,%rsi
   1c354:	49 89 57 10          	mov    %rdx,0x10(%r15)
   1c358:	44 89 e2             	mov    %r12d,%edx
   1c35b:	c1 e8 07             	shr    $0x7,%eax
   1c35e:	83 e1 01             	and    $0x1,%ecx
   1c361:	c1 ea 10             	shr    $0x10,%edx
   1c364:	0f b6 c0             	movzbl %al,%eax
   1c367:	41 c1 e9 18          	shr    $0x18,%r9d
   1c36b:	4c 89 54 24 10       	mov    %r10,0x10(%rsp)
   1c370:	0f b6 d2             	movzbl %dl,%edx
   1c373:	48 c1 e0 04          	shl    $0x4,%rax
   1c377:	48 c1 e2 04          	shl    $0x4,%rdx
   1c37b:	4d 8d 04 02          	lea    (%r10,%rax,1),%r8
   1c37f:	48 01 fa             	add    %rdi,%rdx
   1c382:	4c 89 ff             	mov    %r15,%rdi
   1c385:	e8 26 c8 ff ff       	call   18bb0 <lua_close@@LUA_5.4+0x20a0>
   1c38a:	44 8b 45 28          	mov    0x28(%rbp),%r8d
   1c38e:	4c 8b 54 24 10       	mov    0x10(%rsp),%r10
   1c393:	45 85 c0             	test   %r8d,%r8d
   1c396:	0f 84 fd f0 ff ff    	je     1b499 <lua_close@@LUA_5.4+0x4989>
   1c39c:	4c 89 ee             	mov    %r13,%rsi
   1c39f:	4c 89 ff             	mov    %r15,%rdi
   1c3a2:	e8 f9 09 ff ff       	call   cda0 <lua_getinfo@@LUA_5.4+0x8e0>
   1c3a7:	41 89 c0             	mov    %eax,%r8d
   1c3aa:	e9 1e f2 ff ff       	jmp    1b5cd <lua_close@@LUA_5.4+0x4abd>
   1c3af:	90                   	nop
   1c3b0:	48 8b 55 08          	mov    0x8(%rbp),%rdx
   1c3b4:	41 8b 45 f8          	mov    -0x8(%r13),%eax
   1c3b8:	4c 89 6d 20          	mov    %r13,0x20(%rbp)
   1c3bc:	44 89 e1             	mov    %r12d,%ecx
   1c3bf:	c1 e9 0f             	shr    $0xf,%ecx
   1c3c2:	45 89 e1             	mov    %r12d,%r9d
   1c3c5:	48 89 de             	mov    %rbx,%rsi
   1c3c8:	4c 89 ff             	mov    %r15,%rdi
   1c3cb:	49 89 57 10          	mov    %rdx,0x10(%r15)
   1c3cf:	44 89 e2             	mov    %r12d,%edx
   1c3d2:	c1 e8 07             	shr    $0x7,%eax
   1c3d5:	83 e1 01             	and    $0x1,%ecx
   1c3d8:	c1 ea 10             	shr    $0x10,%edx
   1c3db:	0f b6 c0             	movzbl %al,%eax
   1c3de:	41 c1 e9 18          	shr    $0x18,%r9d
   1c3e2:	4c 89 54 24 10       	mov    %r10,0x10(%rsp)
   1c3e7:	0f b6 d2             	movzbl %dl,%edx
   1c3ea:	48 c1 e0 04          	shl    $0x4,%rax
   1c3ee:	83 ea 7f             	sub    $0x7f,%edx
   1c3f1:	4d 8d 04 02          	lea    (%r10,%rax,1),%r8
   1c3f5:	48 63 d2             	movslq %edx,%rdx
   1c3f8:	e8 e3 c7 ff ff       	call   18be0 <lua_close@@LUA_5.4+0x20d0>
   1c3fd:	44 8b 45 28          	mov    0x28(%rbp),%r8d
   1c401:	4c 8b 54 24 10       	mov    0x10(%rsp),%r10
   1c406:	45 85 c0             	test   %r8d,%r8d
   1c409:	0f 84 8a f0 ff ff    	je     1b499 <lua_close@@LUA_5.4+0x4989>
   1c40f:	4c 89 ee             	mov    %r13,%rsi
   1c412:	4c 89 ff             	mov    %r15,%rdi
   1c415:	e8 86 09 ff ff       	call   cda0 <lua_getinfo@@LUA_5.4+0x8e0>
   1c41a:	41 89 c0             	mov    %eax,%r8d
   1c41d:	e9 ab f1 ff ff       	jmp    1b5cd <lua_close@@LUA_5.4+0x4abd>
   1c422:	66 0f 1f 44 00 00    	nopw   0x0(%rax,%rax,1)
   1c428:	44 89 e0             	mov    %r12d,%eax
   1c42b:	41 c1 ec 18          	shr    $0x18,%r12d
   1c42f:	48 8b 3c 24          	mov    (%rsp),%rdi
   1c433:	c1 e8 10             	shr    $0x10,%eax
   1c436:	44 89 e2             	mov    %r12d,%edx
   1c439:	0f b6 c0             	movzbl %al,%eax
   1c43c:	48 c1 e2 04          	shl    $0x4,%rdx
   1c440:	48 c1 e0 04          	shl    $0x4,%rax
   1c444:	48 01 fa             	add    %rdi,%rdx
   1c447:	4c 01 d0             	add    %r10,%rax
   1c44a:	0f b6 70 08          	movzbl 0x8(%rax),%esi
   1c44e:	40 80 fe 03          	cmp    $0x3,%sil
   1c452:	0f 84 02 16 00 00    	je     1da5a <lua_close@@LUA_5.4+0x6f4a>
   1c458:	49 8d 4d 04          	lea    0x4(%r13),%rcx
   1c45c:	40 80 fe 13          	cmp    $0x13,%sil
   1c460:	0f 84 cf 17 00 00    	je     1dc35 <lua_close@@LUA_5.4+0x7125>
   1c466:	66 2e 0f 1f 84 00 00 	cs nopw 0x0(%rax,%rax,1)
   1c46d:	00 00 00 
   1c470:	45 85 c0             	test   %r8d,%r8d
   1c473:	0f 85 77 04 00 00    	jne    1c8f0 <lua_close@@LUA_5.4+0x5de0>
   1c479:	45 8b 65 00          	mov    0x0(%r13),%r12d
   1c47d:	49 89 cd             	mov    %rcx,%r13
   1c480:	44 89 e3             	mov    %r12d,%ebx
   1c483:	44 89 e0             	mov    %r12d,%eax
   1c486:	c1 eb 07             	shr    $0x7,%ebx
   1c489:	83 e0 7f             	and    $0x7f,%eax
   1c48c:	0f b6 db             	movzbl %bl,%ebx
   1c48f:	49 8b 04 c6          	mov    (%r14,%rax,8),%rax
   1c493:	48 c1 e3 04          	shl    $0x4,%rbx
   1c497:	4c 01 d3             	add    %r10,%rbx
   1c49a:	48 8d 4b 40          	lea    0x40(%rbx),%rcx
   1c49e:	ff e0                	jmp    *%rax
   1c4a0:	44 89 e0             	mov    %r12d,%eax
   1c4a3:	41 c1 ec 18          	shr    $0x18,%r12d
   1c4a7:	49 8d 55 04          	lea    0x4(%r13),%rdx
   1c4ab:	c1 e8 10             	shr    $0x10,%eax
   1c4ae:	41 83 ec 7f          	sub    $0x7f,%r12d
   1c4b2:	0f b6 c0             	movzbl %al,%eax
   1c4b5:	48 c1 e0 04          	shl    $0x4,%rax
   1c4b9:	4c 01 d0             	add    %r10,%rax
   1c4bc:	0f b6 48 08          	movzbl 0x8(%rax),%ecx
   1c4c0:	80 f9 03             	cmp    $0x3,%cl
   1c4c3:	0f 84 35 16 00 00    	je     1dafe <lua_close@@LUA_5.4+0x6fee>
   1c4c9:	80 f9 13             	cmp    $0x13,%cl
   1c4cc:	0f 84 f6 17 00 00    	je     1dcc8 <lua_close@@LUA_5.4+0x71b8>
   1c4d2:	4c 89 ea             	mov    %r13,%rdx
   1c4d5:	45 85 c0             	test   %r8d,%r8d
   1c4d8:	0f 85 5e 0b 00 00    	jne    1d03c <lua_close@@LUA_5.4+0x652c>
   1c4de:	44 8b 22             	mov    (%rdx),%r12d
   1c4e1:	4c 8d 6a 04          	lea    0x4(%rdx),%r13
   1c4e5:	e9 1e ef ff ff       	jmp    1b408 <lua_close@@LUA_5.4+0x48f8>
   1c4ea:	66 0f 1f 44 00 00    	nopw   0x0(%rax,%rax,1)
   1c4f0:	45 89 e1             	mov    %r12d,%r9d
   1c4f3:	41 c1 e9 10          	shr    $0x10,%r9d
   1c4f7:	45 0f b6 c9          	movzbl %r9b,%r9d
   1c4fb:	49 c1 e1 04          	shl    $0x4,%r9
   1c4ff:	4d 01 d1             	add    %r10,%r9
   1c502:	41 f7 c4 00 80 00 00 	test   $0x8000,%r12d
   1c509:	0f 84 34 11 00 00    	je     1d643 <lua_close@@LUA_5.4+0x6b33>
   1c50f:	48 8b 04 24          	mov    (%rsp),%rax
   1c513:	41 c1 ec 18          	shr    $0x18,%r12d
   1c517:	49 c1 e4 04          	shl    $0x4,%r12
   1c51b:	49 01 c4             	add    %rax,%r12
   1c51e:	49 8b 01             	mov    (%r9),%rax
   1c521:	49 8b 34 24          	mov    (%r12),%rsi
   1c525:	48 89 43 10          	mov    %rax,0x10(%rbx)
   1c529:	41 0f b6 41 08       	movzbl 0x8(%r9),%eax
   1c52e:	88 43 18             	mov    %al,0x18(%rbx)
   1c531:	31 c0                	xor    %eax,%eax
   1c533:	41 80 79 08 45       	cmpb   $0x45,0x8(%r9)
   1c538:	0f 85 24 ef ff ff    	jne    1b462 <lua_close@@LUA_5.4+0x4952>
   1c53e:	49 8b 39             	mov    (%r9),%rdi
   1c541:	44 89 44 24 20       	mov    %r8d,0x20(%rsp)
   1c546:	4c 89 54 24 18       	mov    %r10,0x18(%rsp)
   1c54b:	4c 89 4c 24 10       	mov    %r9,0x10(%rsp)
   1c550:	e8 1b b4 ff ff       	call   17970 <lua_close@@LUA_5.4+0xe60>
   1c555:	0f b6 50 08          	movzbl 0x8(%rax),%edx
   1c559:	4c 8b 4c 24 10       	mov    0x10(%rsp),%r9
   1c55e:	4c 8b 54 24 18       	mov    0x18(%rsp),%r10
   1c563:	f6 c2 0f             	test   $0xf,%dl
   1c566:	0f 84 f6 ee ff ff    	je     1b462 <lua_close@@LUA_5.4+0x4952>
   1c56c:	48 8b 00             	mov    (%rax),%rax
   1c56f:	88 53 08             	mov    %dl,0x8(%rbx)
   1c572:	44 8b 44 24 20       	mov    0x20(%rsp),%r8d
   1c577:	48 89 03             	mov    %rax,(%rbx)
   1c57a:	e9 11 ef ff ff       	jmp    1b490 <lua_close@@LUA_5.4+0x4980>
   1c57f:	90                   	nop
   1c580:	44 89 e0             	mov    %r12d,%eax
   1c583:	44 89 e2             	mov    %r12d,%edx
   1c586:	31 c9                	xor    %ecx,%ecx
   1c588:	c1 e8 10             	shr    $0x10,%eax
   1c58b:	c1 ea 18             	shr    $0x18,%edx
   1c58e:	25 ff 00 00 00       	and    $0xff,%eax
   1c593:	74 0c                	je     1c5a1 <lua_close@@LUA_5.4+0x5a91>
   1c595:	8d 48 ff             	lea    -0x1(%rax),%ecx
   1c598:	b8 01 00 00 00       	mov    $0x1,%eax
   1c59d:	d3 e0                	shl    %cl,%eax
   1c59f:	89 c1                	mov    %eax,%ecx
   1c5a1:	41 81 e4 00 80 00 00 	and    $0x8000,%r12d
   1c5a8:	74 0c                	je     1c5b6 <lua_close@@LUA_5.4+0x5aa6>
   1c5aa:	41 8b 45 00          	mov    0x0(%r13),%eax
   1c5ae:	c1 e8 07             	shr    $0x7,%eax
   1c5b1:	c1 e0 08             	shl    $0x8,%eax
   1c5b4:	01 c2                	add    %eax,%edx
   1c5b6:	4d 8d 65 04          	lea    0x4(%r13),%r12
   1c5ba:	4c 8d 6b 10          	lea    0x10(%rbx),%r13
   1c5be:	4c 89 ff             	mov    %r15,%rdi
   1c5c1:	89 54 24 18          	mov    %edx,0x18(%rsp)
   1c5c5:	4d 89 6f 10          	mov    %r13,0x10(%r15)
   1c5c9:	44 89 44 24 28       	mov    %r8d,0x28(%rsp)
   1c5ce:	4c 89 54 24 20       	mov    %r10,0x20(%rsp)
   1c5d3:	89 4c 24 10          	mov    %ecx,0x10(%rsp)
   1c5d7:	e8 b4 b1 ff ff       	call   17790 <lua_close@@LUA_5.4+0xc80>
   1c5dc:	8b 4c 24 10          	mov    0x10(%rsp),%ecx
   1c5e0:	8b 54 24 18          	mov    0x18(%rsp),%edx
   1c5e4:	c6 43 08 45          	movb   $0x45,0x8(%rbx)
   1c5e8:	48 89 c6             	mov    %rax,%rsi
   1c5eb:	4c 8b 54 24 20       	mov    0x20(%rsp),%r10
   1c5f0:	44 8b 44 24 28       	mov    0x28(%rsp),%r8d
   1c5f5:	48 89 03             	mov    %rax,(%rbx)
   1c5f8:	89 c8                	mov    %ecx,%eax
   1c5fa:	09 d0                	or     %edx,%eax
   1c5fc:	0f 85 17 15 00 00    	jne    1db19 <lua_close@@LUA_5.4+0x7009>
   1c602:	49 8b 47 18          	mov    0x18(%r15),%rax
   1c606:	48 83 78 18 00       	cmpq   $0x0,0x18(%rax)
   1c60b:	0f 8e 77 fb ff ff    	jle    1c188 <lua_close@@LUA_5.4+0x5678>
   1c611:	4c 89 65 20          	mov    %r12,0x20(%rbp)
   1c615:	4c 89 ff             	mov    %r15,%rdi
   1c618:	4d 89 6f 10          	mov    %r13,0x10(%r15)
   1c61c:	4c 89 54 24 10       	mov    %r10,0x10(%rsp)
   1c621:	e8 7a 52 ff ff       	call   118a0 <lua_yieldk@@LUA_5.4+0x3330>
   1c626:	44 8b 45 28          	mov    0x28(%rbp),%r8d
   1c62a:	4c 8b 54 24 10       	mov    0x10(%rsp),%r10
   1c62f:	e9 54 fb ff ff       	jmp    1c188 <lua_close@@LUA_5.4+0x5678>
   1c634:	0f 1f 40 00          	nopl   0x0(%rax)
   1c638:	44 89 e0             	mov    %r12d,%eax
   1c63b:	41 c1 ec 18          	shr    $0x18,%r12d
   1c63f:	c1 e8 10             	shr    $0x10,%eax
   1c642:	44 89 e2             	mov    %r12d,%edx
   1c645:	0f b6 c0             	movzbl %al,%eax
   1c648:	48 c1 e2 04          	shl    $0x4,%rdx
   1c64c:	48 c1 e0 04          	shl    $0x4,%rax
   1c650:	4c 01 d2             	add    %r10,%rdx
   1c653:	4c 01 d0             	add    %r10,%rax
   1c656:	0f b6 48 08          	movzbl 0x8(%rax),%ecx
   1c65a:	80 f9 13             	cmp    $0x13,%cl
   1c65d:	0f 84 ec 10 00 00    	je     1d74f <lua_close@@LUA_5.4+0x6c3f>
   1c663:	80 f9 03             	cmp    $0x3,%cl
   1c666:	0f 85 fd ee ff ff    	jne    1b569 <lua_close@@LUA_5.4+0x4a59>
   1c66c:	66 0f ef c0          	pxor   %xmm0,%xmm0
   1c670:	f2 48 0f 2a 00       	cvtsi2sdq (%rax),%xmm0
   1c675:	0f b6 42 08          	movzbl 0x8(%rdx),%eax
   1c679:	3c 13                	cmp    $0x13,%al
   1c67b:	0f 84 de 10 00 00    	je     1d75f <lua_close@@LUA_5.4+0x6c4f>
   1c681:	3c 03                	cmp    $0x3,%al
   1c683:	0f 85 e0 ee ff ff    	jne    1b569 <lua_close@@LUA_5.4+0x4a59>
   1c689:	66 0f ef c9          	pxor   %xmm1,%xmm1
   1c68d:	f2 48 0f 2a 0a       	cvtsi2sdq (%rdx),%xmm1
   1c692:	e9 56 01 00 00       	jmp    1c7ed <lua_close@@LUA_5.4+0x5cdd>
   1c697:	66 0f 1f 84 00 00 00 	nopw   0x0(%rax,%rax,1)
   1c69e:	00 00 
   1c6a0:	c6 43 08 01          	movb   $0x1,0x8(%rbx)
   1c6a4:	49 8d 5d 04          	lea    0x4(%r13),%rbx
   1c6a8:	45 85 c0             	test   %r8d,%r8d
   1c6ab:	0f 84 50 ed ff ff    	je     1b401 <lua_close@@LUA_5.4+0x48f1>
   1c6b1:	e9 43 f2 ff ff       	jmp    1b8f9 <lua_close@@LUA_5.4+0x4de9>
   1c6b6:	66 2e 0f 1f 84 00 00 	cs nopw 0x0(%rax,%rax,1)
   1c6bd:	00 00 00 
   1c6c0:	c6 43 08 01          	movb   $0x1,0x8(%rbx)
   1c6c4:	45 85 c0             	test   %r8d,%r8d
   1c6c7:	0f 84 cc ed ff ff    	je     1b499 <lua_close@@LUA_5.4+0x4989>
   1c6cd:	4c 89 ee             	mov    %r13,%rsi
   1c6d0:	4c 89 ff             	mov    %r15,%rdi
   1c6d3:	e8 c8 06 ff ff       	call   cda0 <lua_getinfo@@LUA_5.4+0x8e0>
   1c6d8:	41 89 c0             	mov    %eax,%r8d
   1c6db:	e9 ed ee ff ff       	jmp    1b5cd <lua_close@@LUA_5.4+0x4abd>
   1c6e0:	44 89 e0             	mov    %r12d,%eax
   1c6e3:	41 c1 ec 18          	shr    $0x18,%r12d
   1c6e7:	c1 e8 10             	shr    $0x10,%eax
   1c6ea:	44 89 e2             	mov    %r12d,%edx
   1c6ed:	0f b6 c0             	movzbl %al,%eax
   1c6f0:	48 c1 e2 04          	shl    $0x4,%rdx
   1c6f4:	48 c1 e0 04          	shl    $0x4,%rax
   1c6f8:	4c 01 d2             	add    %r10,%rdx
   1c6fb:	4c 01 d0             	add    %r10,%rax
   1c6fe:	0f b6 48 08          	movzbl 0x8(%rax),%ecx
   1c702:	80 f9 03             	cmp    $0x3,%cl
   1c705:	0f 85 60 18 00 00    	jne    1df6b <lua_close@@LUA_5.4+0x745b>
   1c70b:	48 8b 00             	mov    (%rax),%rax
   1c70e:	0f b6 4a 08          	movzbl 0x8(%rdx),%ecx
   1c712:	80 f9 03             	cmp    $0x3,%cl
   1c715:	0f 85 85 1d 00 00    	jne    1e4a0 <lua_close@@LUA_5.4+0x7990>
   1c71b:	48 8b 12             	mov    (%rdx),%rdx
   1c71e:	48 09 d0             	or     %rdx,%rax
   1c721:	c6 43 08 03          	movb   $0x3,0x8(%rbx)
   1c725:	4d 8d 65 04          	lea    0x4(%r13),%r12
   1c729:	48 89 03             	mov    %rax,(%rbx)
   1c72c:	e9 57 fa ff ff       	jmp    1c188 <lua_close@@LUA_5.4+0x5678>
   1c731:	0f 1f 80 00 00 00 00 	nopl   0x0(%rax)
   1c738:	44 89 e0             	mov    %r12d,%eax
   1c73b:	41 c1 ec 18          	shr    $0x18,%r12d
   1c73f:	c1 e8 10             	shr    $0x10,%eax
   1c742:	44 89 e2             	mov    %r12d,%edx
   1c745:	0f b6 c0             	movzbl %al,%eax
   1c748:	48 c1 e2 04          	shl    $0x4,%rdx
   1c74c:	48 c1 e0 04          	shl    $0x4,%rax
   1c750:	4c 01 d2             	add    %r10,%rdx
   1c753:	4c 01 d0             	add    %r10,%rax
   1c756:	0f b6 48 08          	movzbl 0x8(%rax),%ecx
   1c75a:	80 f9 03             	cmp    $0x3,%cl
   1c75d:	0f 85 ad 1a 00 00    	jne    1e210 <lua_close@@LUA_5.4+0x7700>
   1c763:	48 8b 00             	mov    (%rax),%rax
   1c766:	0f b6 4a 08          	movzbl 0x8(%rdx),%ecx
   1c76a:	80 f9 03             	cmp    $0x3,%cl
   1c76d:	0f 85 0d 1e 00 00    	jne    1e580 <lua_close@@LUA_5.4+0x7a70>
   1c773:	48 8b 12             	mov    (%rdx),%rdx
   1c776:	48 21 d0             	and    %rdx,%rax
   1c779:	c6 43 08 03          	movb   $0x3,0x8(%rbx)
   1c77d:	4d 8d 65 04          	lea    0x4(%r13),%r12
   1c781:	48 89 03             	mov    %rax,(%rbx)
   1c784:	e9 ff f9 ff ff       	jmp    1c188 <lua_close@@LUA_5.4+0x5678>
   1c789:	0f 1f 80 00 00 00 00 	nopl   0x0(%rax)
   1c790:	44 89 e0             	mov    %r12d,%eax
   1c793:	41 c1 ec 18          	shr    $0x18,%r12d
   1c797:	c1 e8 10             	shr    $0x10,%eax
   1c79a:	0f b6 c0             	movzbl %al,%eax
   1c79d:	48 c1 e0 04          	shl    $0x4,%rax
   1c7a1:	4c 01 d0             	add    %r10,%rax
   1c7a4:	0f b6 50 08          	movzbl 0x8(%rax),%edx
   1c7a8:	80 fa 13             	cmp    $0x13,%dl
   1c7ab:	0f 84 32 10 00 00    	je     1d7e3 <lua_close@@LUA_5.4+0x6cd3>
   1c7b1:	80 fa 03             	cmp    $0x3,%dl
   1c7b4:	0f 85 af ed ff ff    	jne    1b569 <lua_close@@LUA_5.4+0x4a59>
   1c7ba:	66 0f ef c0          	pxor   %xmm0,%xmm0
   1c7be:	f2 48 0f 2a 00       	cvtsi2sdq (%rax),%xmm0
   1c7c3:	48 8b 04 24          	mov    (%rsp),%rax
   1c7c7:	49 c1 e4 04          	shl    $0x4,%r12
   1c7cb:	4c 01 e0             	add    %r12,%rax
   1c7ce:	0f b6 50 08          	movzbl 0x8(%rax),%edx
   1c7d2:	80 fa 13             	cmp    $0x13,%dl
   1c7d5:	0f 84 5c 15 00 00    	je     1dd37 <lua_close@@LUA_5.4+0x7227>
   1c7db:	80 fa 03             	cmp    $0x3,%dl
   1c7de:	0f 85 85 ed ff ff    	jne    1b569 <lua_close@@LUA_5.4+0x4a59>
   1c7e4:	66 0f ef c9          	pxor   %xmm1,%xmm1
   1c7e8:	f2 48 0f 2a 08       	cvtsi2sdq (%rax),%xmm1
   1c7ed:	49 83 c5 04          	add    $0x4,%r13
   1c7f1:	66 0f 2e 0d 5f 68 01 	ucomisd 0x1685f(%rip),%xmm1        # 33058 <lua_ident@@LUA_5.4+0xbf8>
   1c7f8:	00 
   1c7f9:	0f 8a e3 14 00 00    	jp     1dce2 <lua_close@@LUA_5.4+0x71d2>
   1c7ff:	0f 85 dd 14 00 00    	jne    1dce2 <lua_close@@LUA_5.4+0x71d2>
   1c805:	f2 0f 59 c0          	mulsd  %xmm0,%xmm0
   1c809:	e9 6c 04 00 00       	jmp    1cc7a <lua_close@@LUA_5.4+0x616a>
   1c80e:	66 90                	xchg   %ax,%ax
   1c810:	44 89 e0             	mov    %r12d,%eax
   1c813:	41 c1 ec 18          	shr    $0x18,%r12d
   1c817:	48 8b 3c 24          	mov    (%rsp),%rdi
   1c81b:	c1 e8 10             	shr    $0x10,%eax
   1c81e:	44 89 e2             	mov    %r12d,%edx
   1c821:	0f b6 c0             	movzbl %al,%eax
   1c824:	48 c1 e2 04          	shl    $0x4,%rdx
   1c828:	48 c1 e0 04          	shl    $0x4,%rax
   1c82c:	48 01 fa             	add    %rdi,%rdx
   1c82f:	4c 01 d0             	add    %r10,%rax
   1c832:	0f b6 70 08          	movzbl 0x8(%rax),%esi
   1c836:	40 80 fe 03          	cmp    $0x3,%sil
   1c83a:	0f 84 8b 11 00 00    	je     1d9cb <lua_close@@LUA_5.4+0x6ebb>
   1c840:	49 8d 4d 04          	lea    0x4(%r13),%rcx
   1c844:	40 80 fe 13          	cmp    $0x13,%sil
   1c848:	0f 85 22 fc ff ff    	jne    1c470 <lua_close@@LUA_5.4+0x5960>
   1c84e:	f2 0f 10 00          	movsd  (%rax),%xmm0
   1c852:	0f b6 42 08          	movzbl 0x8(%rdx),%eax
   1c856:	3c 13                	cmp    $0x13,%al
   1c858:	0f 85 9a 06 00 00    	jne    1cef8 <lua_close@@LUA_5.4+0x63e8>
   1c85e:	f2 0f 10 0a          	movsd  (%rdx),%xmm1
   1c862:	e9 a2 06 00 00       	jmp    1cf09 <lua_close@@LUA_5.4+0x63f9>
   1c867:	66 0f 1f 84 00 00 00 	nopw   0x0(%rax,%rax,1)
   1c86e:	00 00 
   1c870:	44 89 e0             	mov    %r12d,%eax
   1c873:	41 c1 ec 18          	shr    $0x18,%r12d
   1c877:	c1 e8 10             	shr    $0x10,%eax
   1c87a:	0f b6 c0             	movzbl %al,%eax
   1c87d:	48 c1 e0 04          	shl    $0x4,%rax
   1c881:	49 8d 14 02          	lea    (%r10,%rax,1),%rdx
   1c885:	44 89 e0             	mov    %r12d,%eax
   1c888:	0f b6 72 08          	movzbl 0x8(%rdx),%esi
   1c88c:	48 c1 e0 04          	shl    $0x4,%rax
   1c890:	4c 01 d0             	add    %r10,%rax
   1c893:	40 80 fe 03          	cmp    $0x3,%sil
   1c897:	0f 84 5f 11 00 00    	je     1d9fc <lua_close@@LUA_5.4+0x6eec>
   1c89d:	49 8d 4d 04          	lea    0x4(%r13),%rcx
   1c8a1:	40 80 fe 13          	cmp    $0x13,%sil
   1c8a5:	0f 85 c5 fb ff ff    	jne    1c470 <lua_close@@LUA_5.4+0x5960>
   1c8ab:	f2 0f 10 0a          	movsd  (%rdx),%xmm1
   1c8af:	0f b6 50 08          	movzbl 0x8(%rax),%edx
   1c8b3:	80 fa 13             	cmp    $0x13,%dl
   1c8b6:	0f 84 68 11 00 00    	je     1da24 <lua_close@@LUA_5.4+0x6f14>
   1c8bc:	80 fa 03             	cmp    $0x3,%dl
   1c8bf:	0f 85 ab fb ff ff    	jne    1c470 <lua_close@@LUA_5.4+0x5960>
   1c8c5:	66 0f ef c0          	pxor   %xmm0,%xmm0
   1c8c9:	f2 48 0f 2a 00       	cvtsi2sdq (%rax),%xmm0
   1c8ce:	f2 0f 58 c1          	addsd  %xmm1,%xmm0
   1c8d2:	49 89 cd             	mov    %rcx,%r13
   1c8d5:	c6 43 08 13          	movb   $0x13,0x8(%rbx)
   1c8d9:	48 83 c1 04          	add    $0x4,%rcx
   1c8dd:	f2 0f 11 03          	movsd  %xmm0,(%rbx)
   1c8e1:	45 85 c0             	test   %r8d,%r8d
   1c8e4:	0f 84 8f fb ff ff    	je     1c479 <lua_close@@LUA_5.4+0x5969>
   1c8ea:	66 0f 1f 44 00 00    	nopw   0x0(%rax,%rax,1)
   1c8f0:	4c 89 ee             	mov    %r13,%rsi
   1c8f3:	4c 89 ff             	mov    %r15,%rdi
   1c8f6:	48 89 4c 24 10       	mov    %rcx,0x10(%rsp)
   1c8fb:	e8 a0 04 ff ff       	call   cda0 <lua_getinfo@@LUA_5.4+0x8e0>
   1c900:	48 8b 4c 24 10       	mov    0x10(%rsp),%rcx
   1c905:	41 89 c0             	mov    %eax,%r8d
   1c908:	48 8b 45 00          	mov    0x0(%rbp),%rax
   1c90c:	4c 8d 50 10          	lea    0x10(%rax),%r10
   1c910:	e9 64 fb ff ff       	jmp    1c479 <lua_close@@LUA_5.4+0x5969>
   1c915:	0f 1f 00             	nopl   (%rax)
   1c918:	44 89 e0             	mov    %r12d,%eax
   1c91b:	41 c1 ec 18          	shr    $0x18,%r12d
   1c91f:	c1 e8 10             	shr    $0x10,%eax
   1c922:	41 8d 74 24 81       	lea    -0x7f(%r12),%esi
   1c927:	0f b6 c0             	movzbl %al,%eax
   1c92a:	48 c1 e0 04          	shl    $0x4,%rax
   1c92e:	4c 01 d0             	add    %r10,%rax
   1c931:	0f b6 50 08          	movzbl 0x8(%rax),%edx
   1c935:	80 fa 03             	cmp    $0x3,%dl
   1c938:	0f 85 12 17 00 00    	jne    1e050 <lua_close@@LUA_5.4+0x7540>
   1c93e:	48 8b 08             	mov    (%rax),%rcx
   1c941:	4d 8d 65 04          	lea    0x4(%r13),%r12
   1c945:	48 85 c9             	test   %rcx,%rcx
   1c948:	0f 88 d3 0d 00 00    	js     1d721 <lua_close@@LUA_5.4+0x6c11>
   1c94e:	48 63 c6             	movslq %esi,%rax
   1c951:	31 d2                	xor    %edx,%edx
   1c953:	48 d3 e0             	shl    %cl,%rax
   1c956:	48 83 f9 40          	cmp    $0x40,%rcx
   1c95a:	48 0f 4c d0          	cmovl  %rax,%rdx
   1c95e:	48 89 13             	mov    %rdx,(%rbx)
   1c961:	c6 43 08 03          	movb   $0x3,0x8(%rbx)
   1c965:	e9 1e f8 ff ff       	jmp    1c188 <lua_close@@LUA_5.4+0x5678>
   1c96a:	66 0f 1f 44 00 00    	nopw   0x0(%rax,%rax,1)
   1c970:	48 8b 7c 24 08       	mov    0x8(%rsp),%rdi
   1c975:	41 c1 ec 10          	shr    $0x10,%r12d
   1c979:	48 8b 13             	mov    (%rbx),%rdx
   1c97c:	41 0f b6 c4          	movzbl %r12b,%eax
   1c980:	48 8b 74 c7 20       	mov    0x20(%rdi,%rax,8),%rsi
   1c985:	48 8b 46 10          	mov    0x10(%rsi),%rax
   1c989:	48 89 10             	mov    %rdx,(%rax)
   1c98c:	0f b6 53 08          	movzbl 0x8(%rbx),%edx
   1c990:	88 50 08             	mov    %dl,0x8(%rax)
   1c993:	f6 43 08 40          	testb  $0x40,0x8(%rbx)
   1c997:	0f 84 f3 ea ff ff    	je     1b490 <lua_close@@LUA_5.4+0x4980>
   1c99d:	f6 46 09 20          	testb  $0x20,0x9(%rsi)
   1c9a1:	0f 84 e9 ea ff ff    	je     1b490 <lua_close@@LUA_5.4+0x4980>
   1c9a7:	48 8b 13             	mov    (%rbx),%rdx
   1c9aa:	f6 42 09 18          	testb  $0x18,0x9(%rdx)
   1c9ae:	0f 84 dc ea ff ff    	je     1b490 <lua_close@@LUA_5.4+0x4980>
   1c9b4:	4c 89 ff             	mov    %r15,%rdi
   1c9b7:	44 89 44 24 18       	mov    %r8d,0x18(%rsp)
   1c9bc:	4c 89 54 24 10       	mov    %r10,0x10(%rsp)
   1c9c1:	e8 da 49 ff ff       	call   113a0 <lua_yieldk@@LUA_5.4+0x2e30>
   1c9c6:	44 8b 44 24 18       	mov    0x18(%rsp),%r8d
   1c9cb:	4c 8b 54 24 10       	mov    0x10(%rsp),%r10
   1c9d0:	e9 bb ea ff ff       	jmp    1b490 <lua_close@@LUA_5.4+0x4980>
   1c9d5:	0f 1f 00             	nopl   (%rax)
   1c9d8:	48 8b 7c 24 08       	mov    0x8(%rsp),%rdi
   1c9dd:	41 c1 ec 10          	shr    $0x10,%r12d
   1c9e1:	41 0f b6 c4          	movzbl %r12b,%eax
   1c9e5:	48 8b 44 c7 20       	mov    0x20(%rdi,%rax,8),%rax
   1c9ea:	48 8b 40 10          	mov    0x10(%rax),%rax
   1c9ee:	48 8b 10             	mov    (%rax),%rdx
   1c9f1:	48 89 13             	mov    %rdx,(%rbx)
   1c9f4:	0f b6 40 08          	movzbl 0x8(%rax),%eax
   1c9f8:	88 43 08             	mov    %al,0x8(%rbx)
   1c9fb:	45 85 c0             	test   %r8d,%r8d
   1c9fe:	0f 84 95 ea ff ff    	je     1b499 <lua_close@@LUA_5.4+0x4989>
   1ca04:	4c 89 ee             	mov    %r13,%rsi
   1ca07:	4c 89 ff             	mov    %r15,%rdi
   1ca0a:	e8 91 03 ff ff       	call   cda0 <lua_getinfo@@LUA_5.4+0x8e0>
   1ca0f:	41 89 c0             	mov    %eax,%r8d
   1ca12:	e9 b6 eb ff ff       	jmp    1b5cd <lua_close@@LUA_5.4+0x4abd>
   1ca17:	66 0f 1f 84 00 00 00 	nopw   0x0(%rax,%rax,1)
   1ca1e:	00 00 
   1ca20:	44 89 e0             	mov    %r12d,%eax
   1ca23:	41 c1 ec 18          	shr    $0x18,%r12d
   1ca27:	c1 e8 10             	shr    $0x10,%eax
   1ca2a:	44 89 e2             	mov    %r12d,%edx
   1ca2d:	0f b6 c0             	movzbl %al,%eax
   1ca30:	48 c1 e2 04          	shl    $0x4,%rdx
   1ca34:	48 c1 e0 04          	shl    $0x4,%rax
   1ca38:	4c 01 d2             	add    %r10,%rdx
   1ca3b:	4c 01 d0             	add    %r10,%rax
   1ca3e:	0f b6 48 08          	movzbl 0x8(%rax),%ecx
   1ca42:	80 f9 03             	cmp    $0x3,%cl
   1ca45:	0f 85 05 19 00 00    	jne    1e350 <lua_close@@LUA_5.4+0x7840>
   1ca4b:	48 8b 00             	mov    (%rax),%rax
   1ca4e:	0f b6 4a 08          	movzbl 0x8(%rdx),%ecx
   1ca52:	80 f9 03             	cmp    $0x3,%cl
   1ca55:	0f 85 95 1b 00 00    	jne    1e5f0 <lua_close@@LUA_5.4+0x7ae0>
   1ca5b:	48 8b 0a             	mov    (%rdx),%rcx
   1ca5e:	48 89 ca             	mov    %rcx,%rdx
   1ca61:	4d 8d 65 04          	lea    0x4(%r13),%r12
   1ca65:	48 f7 da             	neg    %rdx
   1ca68:	0f 88 c9 00 00 00    	js     1cb37 <lua_close@@LUA_5.4+0x6027>
   1ca6e:	89 d1                	mov    %edx,%ecx
   1ca70:	48 d3 e0             	shl    %cl,%rax
   1ca73:	48 83 fa 40          	cmp    $0x40,%rdx
   1ca77:	ba 00 00 00 00       	mov    $0x0,%edx
   1ca7c:	48 0f 4d c2          	cmovge %rdx,%rax
   1ca80:	48 89 03             	mov    %rax,(%rbx)
   1ca83:	c6 43 08 03          	movb   $0x3,0x8(%rbx)
   1ca87:	e9 fc f6 ff ff       	jmp    1c188 <lua_close@@LUA_5.4+0x5678>
   1ca8c:	0f 1f 40 00          	nopl   0x0(%rax)
   1ca90:	44 89 e0             	mov    %r12d,%eax
   1ca93:	41 c1 ec 18          	shr    $0x18,%r12d
   1ca97:	c1 e8 10             	shr    $0x10,%eax
   1ca9a:	44 89 e2             	mov    %r12d,%edx
   1ca9d:	0f b6 c0             	movzbl %al,%eax
   1caa0:	48 c1 e2 04          	shl    $0x4,%rdx
   1caa4:	48 c1 e0 04          	shl    $0x4,%rax
   1caa8:	4c 01 d2             	add    %r10,%rdx
   1caab:	4c 01 d0             	add    %r10,%rax
   1caae:	0f b6 48 08          	movzbl 0x8(%rax),%ecx
   1cab2:	80 f9 03             	cmp    $0x3,%cl
   1cab5:	0f 85 05 19 00 00    	jne    1e3c0 <lua_close@@LUA_5.4+0x78b0>
   1cabb:	48 8b 00             	mov    (%rax),%rax
   1cabe:	0f b6 4a 08          	movzbl 0x8(%rdx),%ecx
   1cac2:	80 f9 03             	cmp    $0x3,%cl
   1cac5:	0f 85 65 19 00 00    	jne    1e430 <lua_close@@LUA_5.4+0x7920>
   1cacb:	48 8b 12             	mov    (%rdx),%rdx
   1cace:	48 31 d0             	xor    %rdx,%rax
   1cad1:	c6 43 08 03          	movb   $0x3,0x8(%rbx)
   1cad5:	4d 8d 65 04          	lea    0x4(%r13),%r12
   1cad9:	48 89 03             	mov    %rax,(%rbx)
   1cadc:	e9 a7 f6 ff ff       	jmp    1c188 <lua_close@@LUA_5.4+0x5678>
   1cae1:	0f 1f 80 00 00 00 00 	nopl   0x0(%rax)
   1cae8:	44 89 e0             	mov    %r12d,%eax
   1caeb:	41 c1 ec 18          	shr    $0x18,%r12d
   1caef:	c1 e8 10             	shr    $0x10,%eax
   1caf2:	44 89 e2             	mov    %r12d,%edx
   1caf5:	0f b6 c0             	movzbl %al,%eax
   1caf8:	48 c1 e2 04          	shl    $0x4,%rdx
   1cafc:	48 c1 e0 04          	shl    $0x4,%rax
   1cb00:	4c 01 d2             	add    %r10,%rdx
   1cb03:	4c 01 d0             	add    %r10,%rax
   1cb06:	0f b6 48 08          	movzbl 0x8(%rax),%ecx
   1cb0a:	80 f9 03             	cmp    $0x3,%cl
   1cb0d:	0f 85 8d 16 00 00    	jne    1e1a0 <lua_close@@LUA_5.4+0x7690>
   1cb13:	48 8b 00             	mov    (%rax),%rax
   1cb16:	0f b6 4a 08          	movzbl 0x8(%rdx),%ecx
   1cb1a:	80 f9 03             	cmp    $0x3,%cl
   1cb1d:	0f 85 ed 19 00 00    	jne    1e510 <lua_close@@LUA_5.4+0x7a00>
   1cb23:	48 8b 12             	mov    (%rdx),%rdx
   1cb26:	4d 8d 65 04          	lea    0x4(%r13),%r12
   1cb2a:	48 85 d2             	test   %rdx,%rdx
   1cb2d:	0f 89 3b ff ff ff    	jns    1ca6e <lua_close@@LUA_5.4+0x5f5e>
   1cb33:	89 d1                	mov    %edx,%ecx
   1cb35:	f7 d9                	neg    %ecx
   1cb37:	48 d3 e8             	shr    %cl,%rax
   1cb3a:	48 83 fa c0          	cmp    $0xffffffffffffffc0,%rdx
   1cb3e:	ba 00 00 00 00       	mov    $0x0,%edx
   1cb43:	48 0f 4e c2          	cmovle %rdx,%rax
   1cb47:	e9 34 ff ff ff       	jmp    1ca80 <lua_close@@LUA_5.4+0x5f70>
   1cb4c:	0f 1f 40 00          	nopl   0x0(%rax)
   1cb50:	44 89 e0             	mov    %r12d,%eax
   1cb53:	41 c1 ec 18          	shr    $0x18,%r12d
   1cb57:	c1 e8 10             	shr    $0x10,%eax
   1cb5a:	0f b6 c0             	movzbl %al,%eax
   1cb5d:	48 c1 e0 04          	shl    $0x4,%rax
   1cb61:	49 8d 14 02          	lea    (%r10,%rax,1),%rdx
   1cb65:	44 89 e0             	mov    %r12d,%eax
   1cb68:	0f b6 72 08          	movzbl 0x8(%rdx),%esi
   1cb6c:	48 c1 e0 04          	shl    $0x4,%rax
   1cb70:	4c 01 d0             	add    %r10,%rax
   1cb73:	40 80 fe 03          	cmp    $0x3,%sil
   1cb77:	0f 84 3f 0f 00 00    	je     1dabc <lua_close@@LUA_5.4+0x6fac>
   1cb7d:	49 8d 4d 04          	lea    0x4(%r13),%rcx
   1cb81:	40 80 fe 13          	cmp    $0x13,%sil
   1cb85:	0f 85 e5 f8 ff ff    	jne    1c470 <lua_close@@LUA_5.4+0x5960>
   1cb8b:	f2 0f 10 02          	movsd  (%rdx),%xmm0
   1cb8f:	0f b6 50 08          	movzbl 0x8(%rax),%edx
   1cb93:	80 fa 13             	cmp    $0x13,%dl
   1cb96:	0f 84 48 0f 00 00    	je     1dae4 <lua_close@@LUA_5.4+0x6fd4>
   1cb9c:	80 fa 03             	cmp    $0x3,%dl
   1cb9f:	0f 85 cb f8 ff ff    	jne    1c470 <lua_close@@LUA_5.4+0x5960>
   1cba5:	66 0f ef c9          	pxor   %xmm1,%xmm1
   1cba9:	f2 48 0f 2a 08       	cvtsi2sdq (%rax),%xmm1
   1cbae:	f2 0f 5e c1          	divsd  %xmm1,%xmm0
   1cbb2:	f2 0f 10 0d 46 6e 01 	movsd  0x16e46(%rip),%xmm1        # 33a00 <lua_ident@@LUA_5.4+0x15a0>
   1cbb9:	00 
   1cbba:	f2 0f 10 15 9e 64 01 	movsd  0x1649e(%rip),%xmm2        # 33060 <lua_ident@@LUA_5.4+0xc00>
   1cbc1:	00 
   1cbc2:	49 89 cd             	mov    %rcx,%r13
   1cbc5:	66 0f 54 c8          	andpd  %xmm0,%xmm1
   1cbc9:	66 0f 2e d1          	ucomisd %xmm1,%xmm2
   1cbcd:	0f 86 85 03 00 00    	jbe    1cf58 <lua_close@@LUA_5.4+0x6448>
   1cbd3:	f2 48 0f 2c c0       	cvttsd2si %xmm0,%rax
   1cbd8:	66 0f ef c9          	pxor   %xmm1,%xmm1
   1cbdc:	f2 0f 10 1d 84 64 01 	movsd  0x16484(%rip),%xmm3        # 33068 <lua_ident@@LUA_5.4+0xc08>
   1cbe3:	00 
   1cbe4:	f2 48 0f 2a c8       	cvtsi2sd %rax,%xmm1
   1cbe9:	66 0f 28 d1          	movapd %xmm1,%xmm2
   1cbed:	f2 0f c2 d0 06       	cmpnlesd %xmm0,%xmm2
   1cbf2:	66 0f 54 d3          	andpd  %xmm3,%xmm2
   1cbf6:	f2 0f 5c ca          	subsd  %xmm2,%xmm1
   1cbfa:	f2 0f 10 15 fe 6d 01 	movsd  0x16dfe(%rip),%xmm2        # 33a00 <lua_ident@@LUA_5.4+0x15a0>
   1cc01:	00 
   1cc02:	66 0f 55 d0          	andnpd %xmm0,%xmm2
   1cc06:	66 0f 56 ca          	orpd   %xmm2,%xmm1
   1cc0a:	66 0f 28 c1          	movapd %xmm1,%xmm0
   1cc0e:	e9 45 03 00 00       	jmp    1cf58 <lua_close@@LUA_5.4+0x6448>
   1cc13:	0f 1f 44 00 00       	nopl   0x0(%rax,%rax,1)
   1cc18:	44 89 e0             	mov    %r12d,%eax
   1cc1b:	41 c1 ec 18          	shr    $0x18,%r12d
   1cc1f:	c1 e8 10             	shr    $0x10,%eax
   1cc22:	44 89 e2             	mov    %r12d,%edx
   1cc25:	0f b6 c0             	movzbl %al,%eax
   1cc28:	48 c1 e2 04          	shl    $0x4,%rdx
   1cc2c:	48 c1 e0 04          	shl    $0x4,%rax
   1cc30:	4c 01 d2             	add    %r10,%rdx
   1cc33:	4c 01 d0             	add    %r10,%rax
   1cc36:	0f b6 48 08          	movzbl 0x8(%rax),%ecx
   1cc3a:	80 f9 13             	cmp    $0x13,%cl
   1cc3d:	0f 84 25 0b 00 00    	je     1d768 <lua_close@@LUA_5.4+0x6c58>
   1cc43:	80 f9 03             	cmp    $0x3,%cl
   1cc46:	0f 85 1d e9 ff ff    	jne    1b569 <lua_close@@LUA_5.4+0x4a59>
   1cc4c:	66 0f ef c0          	pxor   %xmm0,%xmm0
   1cc50:	f2 48 0f 2a 00       	cvtsi2sdq (%rax),%xmm0
   1cc55:	0f b6 42 08          	movzbl 0x8(%rdx),%eax
   1cc59:	3c 13                	cmp    $0x13,%al
   1cc5b:	0f 84 17 0b 00 00    	je     1d778 <lua_close@@LUA_5.4+0x6c68>
   1cc61:	3c 03                	cmp    $0x3,%al
   1cc63:	0f 85 00 e9 ff ff    	jne    1b569 <lua_close@@LUA_5.4+0x4a59>
   1cc69:	66 0f ef c9          	pxor   %xmm1,%xmm1
   1cc6d:	f2 48 0f 2a 0a       	cvtsi2sdq (%rdx),%xmm1
   1cc72:	f2 0f 5e c1          	divsd  %xmm1,%xmm0
   1cc76:	49 83 c5 04          	add    $0x4,%r13
   1cc7a:	c6 43 08 13          	movb   $0x13,0x8(%rbx)
   1cc7e:	f2 0f 11 03          	movsd  %xmm0,(%rbx)
   1cc82:	e9 e2 e8 ff ff       	jmp    1b569 <lua_close@@LUA_5.4+0x4a59>
   1cc87:	66 0f 1f 84 00 00 00 	nopw   0x0(%rax,%rax,1)
   1cc8e:	00 00 
   1cc90:	44 89 e0             	mov    %r12d,%eax
   1cc93:	48 8b 3c 24          	mov    (%rsp),%rdi
   1cc97:	c1 e8 10             	shr    $0x10,%eax
   1cc9a:	0f b6 c0             	movzbl %al,%eax
   1cc9d:	48 c1 e0 04          	shl    $0x4,%rax
   1cca1:	48 8d 14 07          	lea    (%rdi,%rax,1),%rdx
   1cca5:	41 f7 c4 00 80 00 00 	test   $0x8000,%r12d
   1ccac:	0f 84 6e 08 00 00    	je     1d520 <lua_close@@LUA_5.4+0x6a10>
   1ccb2:	41 c1 ec 18          	shr    $0x18,%r12d
   1ccb6:	49 c1 e4 04          	shl    $0x4,%r12
   1ccba:	49 01 fc             	add    %rdi,%r12
   1ccbd:	31 c0                	xor    %eax,%eax
   1ccbf:	80 7b 08 45          	cmpb   $0x45,0x8(%rbx)
   1ccc3:	48 8b 32             	mov    (%rdx),%rsi
   1ccc6:	0f 84 7e 05 00 00    	je     1d24a <lua_close@@LUA_5.4+0x673a>
   1cccc:	48 8b 4d 08          	mov    0x8(%rbp),%rcx
   1ccd0:	4c 89 54 24 10       	mov    %r10,0x10(%rsp)
   1ccd5:	49 89 c0             	mov    %rax,%r8
   1ccd8:	4c 89 6d 20          	mov    %r13,0x20(%rbp)
   1ccdc:	49 89 4f 10          	mov    %rcx,0x10(%r15)
   1cce0:	4c 89 e1             	mov    %r12,%rcx
   1cce3:	48 89 de             	mov    %rbx,%rsi
   1cce6:	4c 89 ff             	mov    %r15,%rdi
   1cce9:	e8 22 d9 ff ff       	call   1a610 <lua_close@@LUA_5.4+0x3b00>
   1ccee:	44 8b 45 28          	mov    0x28(%rbp),%r8d
   1ccf2:	4c 8b 54 24 10       	mov    0x10(%rsp),%r10
   1ccf7:	e9 94 e7 ff ff       	jmp    1b490 <lua_close@@LUA_5.4+0x4980>
   1ccfc:	0f 1f 40 00          	nopl   0x0(%rax)
   1cd00:	44 89 e2             	mov    %r12d,%edx
   1cd03:	c1 ea 10             	shr    $0x10,%edx
   1cd06:	0f b6 d2             	movzbl %dl,%edx
   1cd09:	41 f7 c4 00 80 00 00 	test   $0x8000,%r12d
   1cd10:	0f 84 94 09 00 00    	je     1d6aa <lua_close@@LUA_5.4+0x6b9a>
   1cd16:	41 c1 ec 18          	shr    $0x18,%r12d
   1cd1a:	48 8b 04 24          	mov    (%rsp),%rax
   1cd1e:	44 89 e1             	mov    %r12d,%ecx
   1cd21:	48 c1 e1 04          	shl    $0x4,%rcx
   1cd25:	48 01 c1             	add    %rax,%rcx
   1cd28:	80 7b 08 45          	cmpb   $0x45,0x8(%rbx)
   1cd2c:	0f 85 fe 07 00 00    	jne    1d530 <lua_close@@LUA_5.4+0x6a20>
   1cd32:	48 8b 3b             	mov    (%rbx),%rdi
   1cd35:	89 d6                	mov    %edx,%esi
   1cd37:	4c 8d 4e ff          	lea    -0x1(%rsi),%r9
   1cd3b:	8b 47 0c             	mov    0xc(%rdi),%eax
   1cd3e:	49 39 c1             	cmp    %rax,%r9
   1cd41:	0f 83 33 10 00 00    	jae    1dd7a <lua_close@@LUA_5.4+0x726a>
   1cd47:	48 8b 47 10          	mov    0x10(%rdi),%rax
   1cd4b:	48 c1 e6 04          	shl    $0x4,%rsi
   1cd4f:	48 8d 74 30 f0       	lea    -0x10(%rax,%rsi,1),%rsi
   1cd54:	f6 46 08 0f          	testb  $0xf,0x8(%rsi)
   1cd58:	0f 84 d4 07 00 00    	je     1d532 <lua_close@@LUA_5.4+0x6a22>
   1cd5e:	48 8b 01             	mov    (%rcx),%rax
   1cd61:	48 89 06             	mov    %rax,(%rsi)
   1cd64:	0f b6 41 08          	movzbl 0x8(%rcx),%eax
   1cd68:	88 46 08             	mov    %al,0x8(%rsi)
   1cd6b:	a8 40                	test   $0x40,%al
   1cd6d:	0f 84 1d e7 ff ff    	je     1b490 <lua_close@@LUA_5.4+0x4980>
   1cd73:	48 8b 33             	mov    (%rbx),%rsi
   1cd76:	f6 46 09 20          	testb  $0x20,0x9(%rsi)
   1cd7a:	0f 84 10 e7 ff ff    	je     1b490 <lua_close@@LUA_5.4+0x4980>
   1cd80:	48 8b 01             	mov    (%rcx),%rax
   1cd83:	f6 40 09 18          	testb  $0x18,0x9(%rax)
   1cd87:	0f 84 03 e7 ff ff    	je     1b490 <lua_close@@LUA_5.4+0x4980>
   1cd8d:	4c 89 ff             	mov    %r15,%rdi
   1cd90:	44 89 44 24 18       	mov    %r8d,0x18(%rsp)
   1cd95:	4c 89 54 24 10       	mov    %r10,0x10(%rsp)
   1cd9a:	e8 71 46 ff ff       	call   11410 <lua_yieldk@@LUA_5.4+0x2ea0>
   1cd9f:	4c 8b 54 24 10       	mov    0x10(%rsp),%r10
   1cda4:	44 8b 44 24 18       	mov    0x18(%rsp),%r8d
   1cda9:	e9 e2 e6 ff ff       	jmp    1b490 <lua_close@@LUA_5.4+0x4980>
   1cdae:	66 90                	xchg   %ax,%ax
   1cdb0:	44 89 e0             	mov    %r12d,%eax
   1cdb3:	41 c1 ec 18          	shr    $0x18,%r12d
   1cdb7:	c1 e8 10             	shr    $0x10,%eax
   1cdba:	0f b6 c0             	movzbl %al,%eax
   1cdbd:	48 c1 e0 04          	shl    $0x4,%rax
   1cdc1:	49 8d 14 02          	lea    (%r10,%rax,1),%rdx
   1cdc5:	44 89 e0             	mov    %r12d,%eax
   1cdc8:	0f b6 72 08          	movzbl 0x8(%rdx),%esi
   1cdcc:	48 c1 e0 04          	shl    $0x4,%rax
   1cdd0:	4c 01 d0             	add    %r10,%rax
   1cdd3:	40 80 fe 03          	cmp    $0x3,%sil
   1cdd7:	0f 84 a4 09 00 00    	je     1d781 <lua_close@@LUA_5.4+0x6c71>
   1cddd:	49 8d 4d 04          	lea    0x4(%r13),%rcx
   1cde1:	40 80 fe 13          	cmp    $0x13,%sil
   1cde5:	0f 85 85 f6 ff ff    	jne    1c470 <lua_close@@LUA_5.4+0x5960>
   1cdeb:	f2 0f 10 02          	movsd  (%rdx),%xmm0
   1cdef:	0f b6 50 08          	movzbl 0x8(%rax),%edx
   1cdf3:	80 fa 13             	cmp    $0x13,%dl
   1cdf6:	0f 84 ad 09 00 00    	je     1d7a9 <lua_close@@LUA_5.4+0x6c99>
   1cdfc:	80 fa 03             	cmp    $0x3,%dl
   1cdff:	0f 85 6b f6 ff ff    	jne    1c470 <lua_close@@LUA_5.4+0x5960>
   1ce05:	66 0f ef c9          	pxor   %xmm1,%xmm1
   1ce09:	f2 48 0f 2a 08       	cvtsi2sdq (%rax),%xmm1
   1ce0e:	f2 0f 59 c1          	mulsd  %xmm1,%xmm0
   1ce12:	49 89 cd             	mov    %rcx,%r13
   1ce15:	c6 43 08 13          	movb   $0x13,0x8(%rbx)
   1ce19:	48 83 c1 04          	add    $0x4,%rcx
   1ce1d:	f2 0f 11 03          	movsd  %xmm0,(%rbx)
   1ce21:	e9 4a f6 ff ff       	jmp    1c470 <lua_close@@LUA_5.4+0x5960>
   1ce26:	66 2e 0f 1f 84 00 00 	cs nopw 0x0(%rax,%rax,1)
   1ce2d:	00 00 00 
   1ce30:	44 89 e0             	mov    %r12d,%eax
   1ce33:	41 c1 ec 18          	shr    $0x18,%r12d
   1ce37:	c1 e8 10             	shr    $0x10,%eax
   1ce3a:	0f b6 c0             	movzbl %al,%eax
   1ce3d:	48 c1 e0 04          	shl    $0x4,%rax
   1ce41:	49 8d 14 02          	lea    (%r10,%rax,1),%rdx
   1ce45:	44 89 e0             	mov    %r12d,%eax
   1ce48:	0f b6 72 08          	movzbl 0x8(%rdx),%esi
   1ce4c:	48 c1 e0 04          	shl    $0x4,%rax
   1ce50:	4c 01 d0             	add    %r10,%rax
   1ce53:	40 80 fe 03          	cmp    $0x3,%sil
   1ce57:	0f 84 55 09 00 00    	je     1d7b2 <lua_close@@LUA_5.4+0x6ca2>
   1ce5d:	49 8d 4d 04          	lea    0x4(%r13),%rcx
   1ce61:	40 80 fe 13          	cmp    $0x13,%sil
   1ce65:	0f 85 05 f6 ff ff    	jne    1c470 <lua_close@@LUA_5.4+0x5960>
   1ce6b:	f2 0f 10 02          	movsd  (%rdx),%xmm0
   1ce6f:	0f b6 50 08          	movzbl 0x8(%rax),%edx
   1ce73:	80 fa 13             	cmp    $0x13,%dl
   1ce76:	0f 84 5e 09 00 00    	je     1d7da <lua_close@@LUA_5.4+0x6cca>
   1ce7c:	80 fa 03             	cmp    $0x3,%dl
   1ce7f:	0f 85 eb f5 ff ff    	jne    1c470 <lua_close@@LUA_5.4+0x5960>
   1ce85:	66 0f ef c9          	pxor   %xmm1,%xmm1
   1ce89:	f2 48 0f 2a 08       	cvtsi2sdq (%rax),%xmm1
   1ce8e:	f2 0f 5c c1          	subsd  %xmm1,%xmm0
   1ce92:	49 89 cd             	mov    %rcx,%r13
   1ce95:	c6 43 08 13          	movb   $0x13,0x8(%rbx)
   1ce99:	48 83 c1 04          	add    $0x4,%rcx
   1ce9d:	f2 0f 11 03          	movsd  %xmm0,(%rbx)
   1cea1:	e9 ca f5 ff ff       	jmp    1c470 <lua_close@@LUA_5.4+0x5960>
   1cea6:	66 2e 0f 1f 84 00 00 	cs nopw 0x0(%rax,%rax,1)
   1cead:	00 00 00 
   1ceb0:	44 89 e0             	mov    %r12d,%eax
   1ceb3:	41 c1 ec 18          	shr    $0x18,%r12d
   1ceb7:	c1 e8 10             	shr    $0x10,%eax
   1ceba:	0f b6 c0             	movzbl %al,%eax
   1cebd:	48 c1 e0 04          	shl    $0x4,%rax
   1cec1:	49 8d 34 02          	lea    (%r10,%rax,1),%rsi
   1cec5:	44 89 e0             	mov    %r12d,%eax
   1cec8:	48 c1 e0 04          	shl    $0x4,%rax
   1cecc:	49 8d 14 02          	lea    (%r10,%rax,1),%rdx
   1ced0:	0f b6 46 08          	movzbl 0x8(%rsi),%eax
   1ced4:	3c 03                	cmp    $0x3,%al
   1ced6:	0f 84 51 0b 00 00    	je     1da2d <lua_close@@LUA_5.4+0x6f1d>
   1cedc:	49 8d 4d 04          	lea    0x4(%r13),%rcx
   1cee0:	3c 13                	cmp    $0x13,%al
   1cee2:	0f 85 88 f5 ff ff    	jne    1c470 <lua_close@@LUA_5.4+0x5960>
   1cee8:	0f b6 42 08          	movzbl 0x8(%rdx),%eax
   1ceec:	f2 0f 10 06          	movsd  (%rsi),%xmm0
   1cef0:	3c 13                	cmp    $0x13,%al
   1cef2:	0f 84 66 f9 ff ff    	je     1c85e <lua_close@@LUA_5.4+0x5d4e>
   1cef8:	3c 03                	cmp    $0x3,%al
   1cefa:	0f 85 70 f5 ff ff    	jne    1c470 <lua_close@@LUA_5.4+0x5960>
   1cf00:	66 0f ef c9          	pxor   %xmm1,%xmm1
   1cf04:	f2 48 0f 2a 0a       	cvtsi2sdq (%rdx),%xmm1
   1cf09:	44 89 44 24 28       	mov    %r8d,0x28(%rsp)
   1cf0e:	49 89 cd             	mov    %rcx,%r13
   1cf11:	4c 89 54 24 20       	mov    %r10,0x20(%rsp)
   1cf16:	48 89 4c 24 18       	mov    %rcx,0x18(%rsp)
   1cf1b:	f2 0f 11 4c 24 10    	movsd  %xmm1,0x10(%rsp)
   1cf21:	e8 da a2 fe ff       	call   7200 <fmod@plt>
   1cf26:	66 0f ef d2          	pxor   %xmm2,%xmm2
   1cf2a:	f2 0f 10 4c 24 10    	movsd  0x10(%rsp),%xmm1
   1cf30:	48 8b 4c 24 18       	mov    0x18(%rsp),%rcx
   1cf35:	66 0f 2f c2          	comisd %xmm2,%xmm0
   1cf39:	4c 8b 54 24 20       	mov    0x20(%rsp),%r10
   1cf3e:	44 8b 44 24 28       	mov    0x28(%rsp),%r8d
   1cf43:	0f 86 12 0d 00 00    	jbe    1dc5b <lua_close@@LUA_5.4+0x714b>
   1cf49:	66 0f 2f d1          	comisd %xmm1,%xmm2
   1cf4d:	76 09                	jbe    1cf58 <lua_close@@LUA_5.4+0x6448>
   1cf4f:	f2 0f 58 c1          	addsd  %xmm1,%xmm0
   1cf53:	0f 1f 44 00 00       	nopl   0x0(%rax,%rax,1)
   1cf58:	c6 43 08 13          	movb   $0x13,0x8(%rbx)
   1cf5c:	48 83 c1 04          	add    $0x4,%rcx
   1cf60:	f2 0f 11 03          	movsd  %xmm0,(%rbx)
   1cf64:	e9 07 f5 ff ff       	jmp    1c470 <lua_close@@LUA_5.4+0x5960>
   1cf69:	0f 1f 80 00 00 00 00 	nopl   0x0(%rax)
   1cf70:	41 c1 ec 0f          	shr    $0xf,%r12d
   1cf74:	66 0f ef c0          	pxor   %xmm0,%xmm0
   1cf78:	c6 43 08 13          	movb   $0x13,0x8(%rbx)
   1cf7c:	41 8d 84 24 01 00 ff 	lea    -0xffff(%r12),%eax
   1cf83:	ff 
   1cf84:	f2 0f 2a c0          	cvtsi2sd %eax,%xmm0
   1cf88:	f2 0f 11 03          	movsd  %xmm0,(%rbx)
   1cf8c:	45 85 c0             	test   %r8d,%r8d
   1cf8f:	0f 84 04 e5 ff ff    	je     1b499 <lua_close@@LUA_5.4+0x4989>
   1cf95:	4c 89 ee             	mov    %r13,%rsi
   1cf98:	4c 89 ff             	mov    %r15,%rdi
   1cf9b:	e8 00 fe fe ff       	call   cda0 <lua_getinfo@@LUA_5.4+0x8e0>
   1cfa0:	41 89 c0             	mov    %eax,%r8d
   1cfa3:	e9 25 e6 ff ff       	jmp    1b5cd <lua_close@@LUA_5.4+0x4abd>
   1cfa8:	0f 1f 84 00 00 00 00 	nopl   0x0(%rax,%rax,1)
   1cfaf:	00 
   1cfb0:	41 c1 ec 0f          	shr    $0xf,%r12d
   1cfb4:	c6 43 08 03          	movb   $0x3,0x8(%rbx)
   1cfb8:	41 8d 84 24 01 00 ff 	lea    -0xffff(%r12),%eax
   1cfbf:	ff 
   1cfc0:	48 98                	cltq
   1cfc2:	48 89 03             	mov    %rax,(%rbx)
   1cfc5:	45 85 c0             	test   %r8d,%r8d
   1cfc8:	0f 84 cb e4 ff ff    	je     1b499 <lua_close@@LUA_5.4+0x4989>
   1cfce:	4c 89 ee             	mov    %r13,%rsi
   1cfd1:	4c 89 ff             	mov    %r15,%rdi
   1cfd4:	e8 c7 fd fe ff       	call   cda0 <lua_getinfo@@LUA_5.4+0x8e0>
   1cfd9:	41 89 c0             	mov    %eax,%r8d
   1cfdc:	e9 ec e5 ff ff       	jmp    1b5cd <lua_close@@LUA_5.4+0x4abd>
   1cfe1:	0f 1f 80 00 00 00 00 	nopl   0x0(%rax)
   1cfe8:	44 89 e0             	mov    %r12d,%eax
   1cfeb:	41 c1 ec 18          	shr    $0x18,%r12d
   1cfef:	c1 e8 10             	shr    $0x10,%eax
   1cff2:	0f b6 c0             	movzbl %al,%eax
   1cff5:	48 c1 e0 04          	shl    $0x4,%rax
   1cff9:	4c 01 d0             	add    %r10,%rax
   1cffc:	0f b6 48 08          	movzbl 0x8(%rax),%ecx
   1d000:	80 f9 03             	cmp    $0x3,%cl
   1d003:	0f 85 27 11 00 00    	jne    1e130 <lua_close@@LUA_5.4+0x7620>
   1d009:	48 8b 00             	mov    (%rax),%rax
   1d00c:	be 7f 00 00 00       	mov    $0x7f,%esi
   1d011:	49 8d 55 04          	lea    0x4(%r13),%rdx
   1d015:	44 29 e6             	sub    %r12d,%esi
   1d018:	0f 88 1c 07 00 00    	js     1d73a <lua_close@@LUA_5.4+0x6c2a>
   1d01e:	89 f1                	mov    %esi,%ecx
   1d020:	48 d3 e0             	shl    %cl,%rax
   1d023:	31 c9                	xor    %ecx,%ecx
   1d025:	83 fe 40             	cmp    $0x40,%esi
   1d028:	48 0f 4d c1          	cmovge %rcx,%rax
   1d02c:	48 89 03             	mov    %rax,(%rbx)
   1d02f:	c6 43 08 03          	movb   $0x3,0x8(%rbx)
   1d033:	45 85 c0             	test   %r8d,%r8d
   1d036:	0f 84 a2 f4 ff ff    	je     1c4de <lua_close@@LUA_5.4+0x59ce>
   1d03c:	48 89 d6             	mov    %rdx,%rsi
   1d03f:	4c 89 ff             	mov    %r15,%rdi
   1d042:	48 89 54 24 10       	mov    %rdx,0x10(%rsp)
   1d047:	e8 54 fd fe ff       	call   cda0 <lua_getinfo@@LUA_5.4+0x8e0>
   1d04c:	48 8b 54 24 10       	mov    0x10(%rsp),%rdx
   1d051:	41 89 c0             	mov    %eax,%r8d
   1d054:	48 8b 45 00          	mov    0x0(%rbp),%rax
   1d058:	4c 8d 50 10          	lea    0x10(%rax),%r10
   1d05c:	e9 7d f4 ff ff       	jmp    1c4de <lua_close@@LUA_5.4+0x59ce>
   1d061:	0f 1f 80 00 00 00 00 	nopl   0x0(%rax)
   1d068:	44 89 e0             	mov    %r12d,%eax
   1d06b:	41 c1 ec 18          	shr    $0x18,%r12d
   1d06f:	48 8b 3c 24          	mov    (%rsp),%rdi
   1d073:	c1 e8 10             	shr    $0x10,%eax
   1d076:	44 89 e2             	mov    %r12d,%edx
   1d079:	0f b6 c0             	movzbl %al,%eax
   1d07c:	48 c1 e2 04          	shl    $0x4,%rdx
   1d080:	48 c1 e0 04          	shl    $0x4,%rax
   1d084:	48 8b 14 17          	mov    (%rdi,%rdx,1),%rdx
   1d088:	4c 01 d0             	add    %r10,%rax
   1d08b:	0f b6 48 08          	movzbl 0x8(%rax),%ecx
   1d08f:	80 f9 03             	cmp    $0x3,%cl
   1d092:	0f 85 28 10 00 00    	jne    1e0c0 <lua_close@@LUA_5.4+0x75b0>
   1d098:	48 8b 00             	mov    (%rax),%rax
   1d09b:	48 31 c2             	xor    %rax,%rdx
   1d09e:	c6 43 08 03          	movb   $0x3,0x8(%rbx)
   1d0a2:	4d 8d 65 04          	lea    0x4(%r13),%r12
   1d0a6:	48 89 13             	mov    %rdx,(%rbx)
   1d0a9:	e9 da f0 ff ff       	jmp    1c188 <lua_close@@LUA_5.4+0x5678>
   1d0ae:	66 90                	xchg   %ax,%ax
   1d0b0:	44 89 e0             	mov    %r12d,%eax
   1d0b3:	41 c1 ec 18          	shr    $0x18,%r12d
   1d0b7:	48 8b 3c 24          	mov    (%rsp),%rdi
   1d0bb:	c1 e8 10             	shr    $0x10,%eax
   1d0be:	44 89 e2             	mov    %r12d,%edx
   1d0c1:	0f b6 c0             	movzbl %al,%eax
   1d0c4:	48 c1 e2 04          	shl    $0x4,%rdx
   1d0c8:	48 c1 e0 04          	shl    $0x4,%rax
   1d0cc:	48 01 fa             	add    %rdi,%rdx
   1d0cf:	4c 01 d0             	add    %r10,%rax
   1d0d2:	0f b6 70 08          	movzbl 0x8(%rax),%esi
   1d0d6:	40 80 fe 03          	cmp    $0x3,%sil
   1d0da:	0f 84 2e 07 00 00    	je     1d80e <lua_close@@LUA_5.4+0x6cfe>
   1d0e0:	49 8d 4d 04          	lea    0x4(%r13),%rcx
   1d0e4:	40 80 fe 13          	cmp    $0x13,%sil
   1d0e8:	0f 85 82 f3 ff ff    	jne    1c470 <lua_close@@LUA_5.4+0x5960>
   1d0ee:	f2 0f 10 00          	movsd  (%rax),%xmm0
   1d0f2:	0f b6 42 08          	movzbl 0x8(%rdx),%eax
   1d0f6:	3c 13                	cmp    $0x13,%al
   1d0f8:	0f 84 38 07 00 00    	je     1d836 <lua_close@@LUA_5.4+0x6d26>
   1d0fe:	3c 03                	cmp    $0x3,%al
   1d100:	0f 85 6a f3 ff ff    	jne    1c470 <lua_close@@LUA_5.4+0x5960>
   1d106:	66 0f ef c9          	pxor   %xmm1,%xmm1
   1d10a:	f2 48 0f 2a 0a       	cvtsi2sdq (%rdx),%xmm1
   1d10f:	f2 0f 5e c1          	divsd  %xmm1,%xmm0
   1d113:	f2 0f 10 15 e5 68 01 	movsd  0x168e5(%rip),%xmm2        # 33a00 <lua_ident@@LUA_5.4+0x15a0>
   1d11a:	00 
   1d11b:	f2 0f 10 1d 3d 5f 01 	movsd  0x15f3d(%rip),%xmm3        # 33060 <lua_ident@@LUA_5.4+0xc00>
   1d122:	00 
   1d123:	49 89 cd             	mov    %rcx,%r13
   1d126:	66 0f 28 c8          	movapd %xmm0,%xmm1
   1d12a:	66 0f 54 ca          	andpd  %xmm2,%xmm1
   1d12e:	66 0f 2e d9          	ucomisd %xmm1,%xmm3
   1d132:	0f 86 20 fe ff ff    	jbe    1cf58 <lua_close@@LUA_5.4+0x6448>
   1d138:	f2 48 0f 2c c0       	cvttsd2si %xmm0,%rax
   1d13d:	66 0f ef c9          	pxor   %xmm1,%xmm1
   1d141:	f2 0f 10 25 1f 5f 01 	movsd  0x15f1f(%rip),%xmm4        # 33068 <lua_ident@@LUA_5.4+0xc08>
   1d148:	00 
   1d149:	66 0f 55 d0          	andnpd %xmm0,%xmm2
   1d14d:	f2 48 0f 2a c8       	cvtsi2sd %rax,%xmm1
   1d152:	66 0f 28 d9          	movapd %xmm1,%xmm3
   1d156:	f2 0f c2 d8 06       	cmpnlesd %xmm0,%xmm3
   1d15b:	66 0f 54 dc          	andpd  %xmm4,%xmm3
   1d15f:	f2 0f 5c cb          	subsd  %xmm3,%xmm1
   1d163:	66 0f 56 ca          	orpd   %xmm2,%xmm1
   1d167:	66 0f 28 c1          	movapd %xmm1,%xmm0
   1d16b:	e9 e8 fd ff ff       	jmp    1cf58 <lua_close@@LUA_5.4+0x6448>
   1d170:	44 89 e0             	mov    %r12d,%eax
   1d173:	48 8b 7c 24 08       	mov    0x8(%rsp),%rdi
   1d178:	c1 e8 10             	shr    $0x10,%eax
   1d17b:	0f b6 c0             	movzbl %al,%eax
   1d17e:	48 8b 44 c7 20       	mov    0x20(%rdi,%rax,8),%rax
   1d183:	4c 8b 48 10          	mov    0x10(%rax),%r9
   1d187:	e9 b6 e2 ff ff       	jmp    1b442 <lua_close@@LUA_5.4+0x4932>
   1d18c:	0f 1f 40 00          	nopl   0x0(%rax)
   1d190:	44 89 e2             	mov    %r12d,%edx
   1d193:	c1 ea 10             	shr    $0x10,%edx
   1d196:	0f b6 d2             	movzbl %dl,%edx
   1d199:	48 c1 e2 04          	shl    $0x4,%rdx
   1d19d:	4c 01 d2             	add    %r10,%rdx
   1d1a0:	41 f7 c4 00 80 00 00 	test   $0x8000,%r12d
   1d1a7:	0f 84 26 04 00 00    	je     1d5d3 <lua_close@@LUA_5.4+0x6ac3>
   1d1ad:	41 c1 ec 18          	shr    $0x18,%r12d
   1d1b1:	48 8b 04 24          	mov    (%rsp),%rax
   1d1b5:	0f b6 73 08          	movzbl 0x8(%rbx),%esi
   1d1b9:	44 89 e1             	mov    %r12d,%ecx
   1d1bc:	48 c1 e1 04          	shl    $0x4,%rcx
   1d1c0:	48 01 c1             	add    %rax,%rcx
   1d1c3:	80 7a 08 03          	cmpb   $0x3,0x8(%rdx)
   1d1c7:	0f 84 22 04 00 00    	je     1d5ef <lua_close@@LUA_5.4+0x6adf>
   1d1cd:	31 c0                	xor    %eax,%eax
   1d1cf:	40 80 fe 45          	cmp    $0x45,%sil
   1d1d3:	0f 84 16 0c 00 00    	je     1ddef <lua_close@@LUA_5.4+0x72df>
   1d1d9:	48 8b 75 08          	mov    0x8(%rbp),%rsi
   1d1dd:	4c 89 6d 20          	mov    %r13,0x20(%rbp)
   1d1e1:	49 89 c0             	mov    %rax,%r8
   1d1e4:	4c 89 54 24 10       	mov    %r10,0x10(%rsp)
   1d1e9:	49 89 77 10          	mov    %rsi,0x10(%r15)
   1d1ed:	e9 f1 fa ff ff       	jmp    1cce3 <lua_close@@LUA_5.4+0x61d3>
   1d1f2:	66 0f 1f 44 00 00    	nopw   0x0(%rax,%rax,1)
   1d1f8:	44 89 e0             	mov    %r12d,%eax
   1d1fb:	48 8b 7c 24 08       	mov    0x8(%rsp),%rdi
   1d200:	44 89 e2             	mov    %r12d,%edx
   1d203:	c1 e8 07             	shr    $0x7,%eax
   1d206:	c1 ea 10             	shr    $0x10,%edx
   1d209:	0f b6 c0             	movzbl %al,%eax
   1d20c:	0f b6 d2             	movzbl %dl,%edx
   1d20f:	48 8b 44 c7 20       	mov    0x20(%rdi,%rax,8),%rax
   1d214:	48 c1 e2 04          	shl    $0x4,%rdx
   1d218:	48 8b 58 10          	mov    0x10(%rax),%rbx
   1d21c:	48 8b 04 24          	mov    (%rsp),%rax
   1d220:	48 01 c2             	add    %rax,%rdx
   1d223:	41 f7 c4 00 80 00 00 	test   $0x8000,%r12d
   1d22a:	0f 84 f0 02 00 00    	je     1d520 <lua_close@@LUA_5.4+0x6a10>
   1d230:	41 c1 ec 18          	shr    $0x18,%r12d
   1d234:	48 8b 32             	mov    (%rdx),%rsi
   1d237:	49 c1 e4 04          	shl    $0x4,%r12
   1d23b:	49 01 c4             	add    %rax,%r12
   1d23e:	31 c0                	xor    %eax,%eax
   1d240:	80 7b 08 45          	cmpb   $0x45,0x8(%rbx)
   1d244:	0f 85 82 fa ff ff    	jne    1cccc <lua_close@@LUA_5.4+0x61bc>
   1d24a:	4c 89 54 24 18       	mov    %r10,0x18(%rsp)
   1d24f:	48 89 54 24 10       	mov    %rdx,0x10(%rsp)
   1d254:	44 89 44 24 20       	mov    %r8d,0x20(%rsp)
   1d259:	48 8b 3b             	mov    (%rbx),%rdi
   1d25c:	e8 bf a6 ff ff       	call   17920 <lua_close@@LUA_5.4+0xe10>
   1d261:	48 8b 54 24 10       	mov    0x10(%rsp),%rdx
   1d266:	4c 8b 54 24 18       	mov    0x18(%rsp),%r10
   1d26b:	f6 40 08 0f          	testb  $0xf,0x8(%rax)
   1d26f:	0f 84 57 fa ff ff    	je     1cccc <lua_close@@LUA_5.4+0x61bc>
   1d275:	49 8b 14 24          	mov    (%r12),%rdx
   1d279:	48 89 10             	mov    %rdx,(%rax)
   1d27c:	41 0f b6 54 24 08    	movzbl 0x8(%r12),%edx
   1d282:	88 50 08             	mov    %dl,0x8(%rax)
   1d285:	83 e2 40             	and    $0x40,%edx
   1d288:	44 8b 44 24 20       	mov    0x20(%rsp),%r8d
   1d28d:	0f 84 fd e1 ff ff    	je     1b490 <lua_close@@LUA_5.4+0x4980>
   1d293:	48 8b 33             	mov    (%rbx),%rsi
   1d296:	f6 46 09 20          	testb  $0x20,0x9(%rsi)
   1d29a:	0f 84 f0 e1 ff ff    	je     1b490 <lua_close@@LUA_5.4+0x4980>
   1d2a0:	49 8b 04 24          	mov    (%r12),%rax
   1d2a4:	f6 40 09 18          	testb  $0x18,0x9(%rax)
   1d2a8:	0f 84 e2 e1 ff ff    	je     1b490 <lua_close@@LUA_5.4+0x4980>
   1d2ae:	e9 da fa ff ff       	jmp    1cd8d <lua_close@@LUA_5.4+0x627d>
   1d2b3:	0f 1f 44 00 00       	nopl   0x0(%rax,%rax,1)
   1d2b8:	41 8b 45 00          	mov    0x0(%r13),%eax
   1d2bc:	48 8b 3c 24          	mov    (%rsp),%rdi
   1d2c0:	4d 8d 65 04          	lea    0x4(%r13),%r12
   1d2c4:	c1 e8 07             	shr    $0x7,%eax
   1d2c7:	48 c1 e0 04          	shl    $0x4,%rax
   1d2cb:	48 01 f8             	add    %rdi,%rax
   1d2ce:	48 8b 10             	mov    (%rax),%rdx
   1d2d1:	48 89 13             	mov    %rdx,(%rbx)
   1d2d4:	0f b6 40 08          	movzbl 0x8(%rax),%eax
   1d2d8:	88 43 08             	mov    %al,0x8(%rbx)
   1d2db:	45 85 c0             	test   %r8d,%r8d
   1d2de:	0f 84 a9 ee ff ff    	je     1c18d <lua_close@@LUA_5.4+0x567d>
   1d2e4:	e9 07 ef ff ff       	jmp    1c1f0 <lua_close@@LUA_5.4+0x56e0>
   1d2e9:	0f 1f 80 00 00 00 00 	nopl   0x0(%rax)
   1d2f0:	41 c1 ec 0f          	shr    $0xf,%r12d
   1d2f4:	48 8b 3c 24          	mov    (%rsp),%rdi
   1d2f8:	44 89 e0             	mov    %r12d,%eax
   1d2fb:	48 c1 e0 04          	shl    $0x4,%rax
   1d2ff:	48 01 f8             	add    %rdi,%rax
   1d302:	e9 e7 f6 ff ff       	jmp    1c9ee <lua_close@@LUA_5.4+0x5ede>
   1d307:	66 0f 1f 84 00 00 00 	nopw   0x0(%rax,%rax,1)
   1d30e:	00 00 
   1d310:	41 c1 ec 10          	shr    $0x10,%r12d
   1d314:	41 0f b6 c4          	movzbl %r12b,%eax
   1d318:	48 c1 e0 04          	shl    $0x4,%rax
   1d31c:	4c 01 d0             	add    %r10,%rax
   1d31f:	e9 ca f6 ff ff       	jmp    1c9ee <lua_close@@LUA_5.4+0x5ede>
   1d324:	0f 1f 40 00          	nopl   0x0(%rax)
   1d328:	41 c1 ec 10          	shr    $0x10,%r12d
   1d32c:	41 0f b6 c4          	movzbl %r12b,%eax
   1d330:	48 89 da             	mov    %rbx,%rdx
   1d333:	48 83 c3 10          	add    $0x10,%rbx
   1d337:	c6 42 08 00          	movb   $0x0,0x8(%rdx)
   1d33b:	83 e8 01             	sub    $0x1,%eax
   1d33e:	73 f0                	jae    1d330 <lua_close@@LUA_5.4+0x6820>
   1d340:	e9 4b e1 ff ff       	jmp    1b490 <lua_close@@LUA_5.4+0x4980>
   1d345:	0f 1f 00             	nopl   (%rax)
   1d348:	c6 43 08 11          	movb   $0x11,0x8(%rbx)
   1d34c:	45 85 c0             	test   %r8d,%r8d
   1d34f:	0f 84 44 e1 ff ff    	je     1b499 <lua_close@@LUA_5.4+0x4989>
   1d355:	4c 89 ee             	mov    %r13,%rsi
   1d358:	4c 89 ff             	mov    %r15,%rdi
   1d35b:	e8 40 fa fe ff       	call   cda0 <lua_getinfo@@LUA_5.4+0x8e0>
   1d360:	41 89 c0             	mov    %eax,%r8d
   1d363:	e9 65 e2 ff ff       	jmp    1b5cd <lua_close@@LUA_5.4+0x4abd>
   1d368:	0f 1f 84 00 00 00 00 	nopl   0x0(%rax,%rax,1)
   1d36f:	00 
   1d370:	44 89 e0             	mov    %r12d,%eax
   1d373:	41 c1 ec 18          	shr    $0x18,%r12d
   1d377:	48 8b 3c 24          	mov    (%rsp),%rdi
   1d37b:	c1 e8 10             	shr    $0x10,%eax
   1d37e:	44 89 e2             	mov    %r12d,%edx
   1d381:	0f b6 c0             	movzbl %al,%eax
   1d384:	48 c1 e2 04          	shl    $0x4,%rdx
   1d388:	48 c1 e0 04          	shl    $0x4,%rax
   1d38c:	48 01 fa             	add    %rdi,%rdx
   1d38f:	4c 01 d0             	add    %r10,%rax
   1d392:	0f b6 70 08          	movzbl 0x8(%rax),%esi
   1d396:	40 80 fe 03          	cmp    $0x3,%sil
   1d39a:	0f 84 9f 04 00 00    	je     1d83f <lua_close@@LUA_5.4+0x6d2f>
   1d3a0:	49 8d 4d 04          	lea    0x4(%r13),%rcx
   1d3a4:	40 80 fe 13          	cmp    $0x13,%sil
   1d3a8:	0f 85 c2 f0 ff ff    	jne    1c470 <lua_close@@LUA_5.4+0x5960>
   1d3ae:	f2 0f 10 08          	movsd  (%rax),%xmm1
   1d3b2:	0f b6 42 08          	movzbl 0x8(%rdx),%eax
   1d3b6:	3c 13                	cmp    $0x13,%al
   1d3b8:	0f 84 a9 04 00 00    	je     1d867 <lua_close@@LUA_5.4+0x6d57>
   1d3be:	3c 03                	cmp    $0x3,%al
   1d3c0:	0f 85 aa f0 ff ff    	jne    1c470 <lua_close@@LUA_5.4+0x5960>
   1d3c6:	66 0f ef c0          	pxor   %xmm0,%xmm0
   1d3ca:	f2 48 0f 2a 02       	cvtsi2sdq (%rdx),%xmm0
   1d3cf:	e9 3a fa ff ff       	jmp    1ce0e <lua_close@@LUA_5.4+0x62fe>
   1d3d4:	0f 1f 40 00          	nopl   0x0(%rax)
   1d3d8:	44 89 e0             	mov    %r12d,%eax
   1d3db:	41 c1 ec 18          	shr    $0x18,%r12d
   1d3df:	48 8b 3c 24          	mov    (%rsp),%rdi
   1d3e3:	c1 e8 10             	shr    $0x10,%eax
   1d3e6:	44 89 e2             	mov    %r12d,%edx
   1d3e9:	0f b6 c0             	movzbl %al,%eax
   1d3ec:	48 c1 e2 04          	shl    $0x4,%rdx
   1d3f0:	48 c1 e0 04          	shl    $0x4,%rax
   1d3f4:	48 01 fa             	add    %rdi,%rdx
   1d3f7:	4c 01 d0             	add    %r10,%rax
   1d3fa:	0f b6 70 08          	movzbl 0x8(%rax),%esi
   1d3fe:	40 80 fe 03          	cmp    $0x3,%sil
   1d402:	0f 84 83 06 00 00    	je     1da8b <lua_close@@LUA_5.4+0x6f7b>
   1d408:	49 8d 4d 04          	lea    0x4(%r13),%rcx
   1d40c:	40 80 fe 13          	cmp    $0x13,%sil
   1d410:	0f 85 5a f0 ff ff    	jne    1c470 <lua_close@@LUA_5.4+0x5960>
   1d416:	f2 0f 10 00          	movsd  (%rax),%xmm0
   1d41a:	0f b6 42 08          	movzbl 0x8(%rdx),%eax
   1d41e:	3c 13                	cmp    $0x13,%al
   1d420:	0f 84 8d 06 00 00    	je     1dab3 <lua_close@@LUA_5.4+0x6fa3>
   1d426:	3c 03                	cmp    $0x3,%al
   1d428:	0f 85 42 f0 ff ff    	jne    1c470 <lua_close@@LUA_5.4+0x5960>
   1d42e:	66 0f ef c9          	pxor   %xmm1,%xmm1
   1d432:	f2 48 0f 2a 0a       	cvtsi2sdq (%rdx),%xmm1
   1d437:	e9 52 fa ff ff       	jmp    1ce8e <lua_close@@LUA_5.4+0x637e>
   1d43c:	0f 1f 40 00          	nopl   0x0(%rax)
   1d440:	44 89 e0             	mov    %r12d,%eax
   1d443:	41 c1 ec 18          	shr    $0x18,%r12d
   1d447:	c1 e8 10             	shr    $0x10,%eax
   1d44a:	0f b6 c0             	movzbl %al,%eax
   1d44d:	48 c1 e0 04          	shl    $0x4,%rax
   1d451:	4c 01 d0             	add    %r10,%rax
   1d454:	0f b6 50 08          	movzbl 0x8(%rax),%edx
   1d458:	80 fa 13             	cmp    $0x13,%dl
   1d45b:	0f 84 af 06 00 00    	je     1db10 <lua_close@@LUA_5.4+0x7000>
   1d461:	80 fa 03             	cmp    $0x3,%dl
   1d464:	0f 85 ff e0 ff ff    	jne    1b569 <lua_close@@LUA_5.4+0x4a59>
   1d46a:	66 0f ef c0          	pxor   %xmm0,%xmm0
   1d46e:	f2 48 0f 2a 00       	cvtsi2sdq (%rax),%xmm0
   1d473:	48 8b 04 24          	mov    (%rsp),%rax
   1d477:	49 c1 e4 04          	shl    $0x4,%r12
   1d47b:	4c 01 e0             	add    %r12,%rax
   1d47e:	0f b6 50 08          	movzbl 0x8(%rax),%edx
   1d482:	80 fa 13             	cmp    $0x13,%dl
   1d485:	0f 84 a3 08 00 00    	je     1dd2e <lua_close@@LUA_5.4+0x721e>
   1d48b:	80 fa 03             	cmp    $0x3,%dl
   1d48e:	0f 85 d5 e0 ff ff    	jne    1b569 <lua_close@@LUA_5.4+0x4a59>
   1d494:	66 0f ef c9          	pxor   %xmm1,%xmm1
   1d498:	f2 48 0f 2a 08       	cvtsi2sdq (%rax),%xmm1
   1d49d:	e9 d0 f7 ff ff       	jmp    1cc72 <lua_close@@LUA_5.4+0x6162>
   1d4a2:	66 0f 1f 44 00 00    	nopw   0x0(%rax,%rax,1)
   1d4a8:	48 8b 7c 24 10       	mov    0x10(%rsp),%rdi
   1d4ad:	48 89 c2             	mov    %rax,%rdx
   1d4b0:	4c 89 e6             	mov    %r12,%rsi
   1d4b3:	48 83 c5 08          	add    $0x8,%rbp
   1d4b7:	e8 e4 3e ff ff       	call   113a0 <lua_yieldk@@LUA_5.4+0x2e30>
   1d4bc:	4c 39 fd             	cmp    %r15,%rbp
   1d4bf:	0f 85 53 e2 ff ff    	jne    1b718 <lua_close@@LUA_5.4+0x4c08>
   1d4c5:	0f 1f 00             	nopl   (%rax)
   1d4c8:	44 8b 44 24 20       	mov    0x20(%rsp),%r8d
   1d4cd:	48 8b 5c 24 28       	mov    0x28(%rsp),%rbx
   1d4d2:	4c 8b 54 24 18       	mov    0x18(%rsp),%r10
   1d4d7:	4c 8b 6c 24 30       	mov    0x30(%rsp),%r13
   1d4dc:	4c 8b 7c 24 10       	mov    0x10(%rsp),%r15
   1d4e1:	48 8b 6c 24 38       	mov    0x38(%rsp),%rbp
   1d4e6:	49 8b 47 18          	mov    0x18(%r15),%rax
   1d4ea:	48 83 78 18 00       	cmpq   $0x0,0x18(%rax)
   1d4ef:	0f 8e 9b df ff ff    	jle    1b490 <lua_close@@LUA_5.4+0x4980>
   1d4f5:	48 83 c3 10          	add    $0x10,%rbx
   1d4f9:	4c 89 6d 20          	mov    %r13,0x20(%rbp)
   1d4fd:	4c 89 ff             	mov    %r15,%rdi
   1d500:	49 89 5f 10          	mov    %rbx,0x10(%r15)
   1d504:	4c 89 54 24 10       	mov    %r10,0x10(%rsp)
   1d509:	e8 92 43 ff ff       	call   118a0 <lua_yieldk@@LUA_5.4+0x3330>
   1d50e:	44 8b 45 28          	mov    0x28(%rbp),%r8d
   1d512:	4c 8b 54 24 10       	mov    0x10(%rsp),%r10
   1d517:	e9 74 df ff ff       	jmp    1b490 <lua_close@@LUA_5.4+0x4980>
   1d51c:	0f 1f 40 00          	nopl   0x0(%rax)
   1d520:	41 c1 ec 18          	shr    $0x18,%r12d
   1d524:	49 c1 e4 04          	shl    $0x4,%r12
   1d528:	4d 01 d4             	add    %r10,%r12
   1d52b:	e9 8d f7 ff ff       	jmp    1ccbd <lua_close@@LUA_5.4+0x61ad>
   1d530:	31 f6                	xor    %esi,%esi
   1d532:	89 d0                	mov    %edx,%eax
   1d534:	c6 44 24 48 03       	movb   $0x3,0x48(%rsp)
   1d539:	48 8d 54 24 40       	lea    0x40(%rsp),%rdx
   1d53e:	49 89 f0             	mov    %rsi,%r8
   1d541:	48 89 44 24 40       	mov    %rax,0x40(%rsp)
   1d546:	48 8b 45 08          	mov    0x8(%rbp),%rax
   1d54a:	4c 89 6d 20          	mov    %r13,0x20(%rbp)
   1d54e:	4c 89 54 24 10       	mov    %r10,0x10(%rsp)
   1d553:	49 89 47 10          	mov    %rax,0x10(%r15)
   1d557:	e9 87 f7 ff ff       	jmp    1cce3 <lua_close@@LUA_5.4+0x61d3>
   1d55c:	31 c0                	xor    %eax,%eax
   1d55e:	c6 44 24 48 03       	movb   $0x3,0x48(%rsp)
   1d563:	48 8b 55 08          	mov    0x8(%rbp),%rdx
   1d567:	44 89 e7             	mov    %r12d,%edi
   1d56a:	49 89 c0             	mov    %rax,%r8
   1d56d:	48 89 7c 24 40       	mov    %rdi,0x40(%rsp)
   1d572:	48 89 d9             	mov    %rbx,%rcx
   1d575:	4c 89 6d 20          	mov    %r13,0x20(%rbp)
   1d579:	4c 89 54 24 10       	mov    %r10,0x10(%rsp)
   1d57e:	49 89 57 10          	mov    %rdx,0x10(%r15)
   1d582:	48 8d 54 24 40       	lea    0x40(%rsp),%rdx
   1d587:	e9 f0 de ff ff       	jmp    1b47c <lua_close@@LUA_5.4+0x496c>
   1d58c:	49 8b 39             	mov    (%r9),%rdi
   1d58f:	44 89 44 24 20       	mov    %r8d,0x20(%rsp)
   1d594:	4c 89 54 24 18       	mov    %r10,0x18(%rsp)
   1d599:	4c 89 4c 24 10       	mov    %r9,0x10(%rsp)
   1d59e:	e8 7d a3 ff ff       	call   17920 <lua_close@@LUA_5.4+0xe10>
   1d5a3:	e9 ad ef ff ff       	jmp    1c555 <lua_close@@LUA_5.4+0x5a45>
   1d5a8:	4c 89 ee             	mov    %r13,%rsi
   1d5ab:	4c 89 54 24 30       	mov    %r10,0x30(%rsp)
   1d5b0:	44 89 44 24 28       	mov    %r8d,0x28(%rsp)
   1d5b5:	48 89 7c 24 20       	mov    %rdi,0x20(%rsp)
   1d5ba:	e8 51 3e ff ff       	call   11410 <lua_yieldk@@LUA_5.4+0x2ea0>
   1d5bf:	4c 8b 54 24 30       	mov    0x30(%rsp),%r10
   1d5c4:	44 8b 44 24 28       	mov    0x28(%rsp),%r8d
   1d5c9:	48 8b 7c 24 20       	mov    0x20(%rsp),%rdi
   1d5ce:	e9 0d e5 ff ff       	jmp    1bae0 <lua_close@@LUA_5.4+0x4fd0>
   1d5d3:	41 c1 ec 18          	shr    $0x18,%r12d
   1d5d7:	0f b6 73 08          	movzbl 0x8(%rbx),%esi
   1d5db:	44 89 e1             	mov    %r12d,%ecx
   1d5de:	48 c1 e1 04          	shl    $0x4,%rcx
   1d5e2:	4c 01 d1             	add    %r10,%rcx
   1d5e5:	80 7a 08 03          	cmpb   $0x3,0x8(%rdx)
   1d5e9:	0f 85 de fb ff ff    	jne    1d1cd <lua_close@@LUA_5.4+0x66bd>
   1d5ef:	48 8b 3a             	mov    (%rdx),%rdi
   1d5f2:	31 c0                	xor    %eax,%eax
   1d5f4:	40 80 fe 45          	cmp    $0x45,%sil
   1d5f8:	0f 85 db fb ff ff    	jne    1d1d9 <lua_close@@LUA_5.4+0x66c9>
   1d5fe:	48 8b 03             	mov    (%rbx),%rax
   1d601:	4c 8d 4f ff          	lea    -0x1(%rdi),%r9
   1d605:	8b 70 0c             	mov    0xc(%rax),%esi
   1d608:	49 39 f1             	cmp    %rsi,%r9
   1d60b:	0f 83 d7 11 00 00    	jae    1e7e8 <lua_close@@LUA_5.4+0x7cd8>
   1d611:	48 8b 40 10          	mov    0x10(%rax),%rax
   1d615:	48 c1 e7 04          	shl    $0x4,%rdi
   1d619:	48 8d 44 38 f0       	lea    -0x10(%rax,%rdi,1),%rax
   1d61e:	f6 40 08 0f          	testb  $0xf,0x8(%rax)
   1d622:	0f 84 b1 fb ff ff    	je     1d1d9 <lua_close@@LUA_5.4+0x66c9>
   1d628:	48 8b 11             	mov    (%rcx),%rdx
   1d62b:	48 89 10             	mov    %rdx,(%rax)
   1d62e:	0f b6 51 08          	movzbl 0x8(%rcx),%edx
   1d632:	88 50 08             	mov    %dl,0x8(%rax)
   1d635:	83 e2 40             	and    $0x40,%edx
   1d638:	0f 84 52 de ff ff    	je     1b490 <lua_close@@LUA_5.4+0x4980>
   1d63e:	e9 30 f7 ff ff       	jmp    1cd73 <lua_close@@LUA_5.4+0x6263>
   1d643:	41 c1 ec 18          	shr    $0x18,%r12d
   1d647:	49 c1 e4 04          	shl    $0x4,%r12
   1d64b:	4d 01 d4             	add    %r10,%r12
   1d64e:	e9 cb ee ff ff       	jmp    1c51e <lua_close@@LUA_5.4+0x5a0e>
   1d653:	4c 89 6c 24 10       	mov    %r13,0x10(%rsp)
   1d658:	e9 e1 e3 ff ff       	jmp    1ba3e <lua_close@@LUA_5.4+0x4f2e>
   1d65d:	48 8b 7d 08          	mov    0x8(%rbp),%rdi
   1d661:	89 c1                	mov    %eax,%ecx
   1d663:	49 89 7f 10          	mov    %rdi,0x10(%r15)
   1d667:	e9 ae e3 ff ff       	jmp    1ba1a <lua_close@@LUA_5.4+0x4f0a>
   1d66c:	49 8b 47 10          	mov    0x10(%r15),%rax
   1d670:	4c 89 6d 20          	mov    %r13,0x20(%rbp)
   1d674:	48 29 d8             	sub    %rbx,%rax
   1d677:	48 c1 f8 04          	sar    $0x4,%rax
   1d67b:	41 81 e4 00 80 00 00 	and    $0x8000,%r12d
   1d682:	89 c1                	mov    %eax,%ecx
   1d684:	0f 84 b9 e1 ff ff    	je     1b843 <lua_close@@LUA_5.4+0x4d33>
   1d68a:	4c 89 d6             	mov    %r10,%rsi
   1d68d:	4c 89 ff             	mov    %r15,%rdi
   1d690:	44 89 44 24 08       	mov    %r8d,0x8(%rsp)
   1d695:	89 0c 24             	mov    %ecx,(%rsp)
   1d698:	e8 23 1c ff ff       	call   f2c0 <lua_yieldk@@LUA_5.4+0xd50>
   1d69d:	44 8b 44 24 08       	mov    0x8(%rsp),%r8d
   1d6a2:	8b 0c 24             	mov    (%rsp),%ecx
   1d6a5:	e9 99 e1 ff ff       	jmp    1b843 <lua_close@@LUA_5.4+0x4d33>
   1d6aa:	41 c1 ec 18          	shr    $0x18,%r12d
   1d6ae:	44 89 e1             	mov    %r12d,%ecx
   1d6b1:	48 c1 e1 04          	shl    $0x4,%rcx
   1d6b5:	4c 01 d1             	add    %r10,%rcx
   1d6b8:	e9 6b f6 ff ff       	jmp    1cd28 <lua_close@@LUA_5.4+0x6218>
   1d6bd:	f2 0f 10 43 20       	movsd  0x20(%rbx),%xmm0
   1d6c2:	66 0f ef db          	pxor   %xmm3,%xmm3
   1d6c6:	f2 0f 10 0b          	movsd  (%rbx),%xmm1
   1d6ca:	f2 0f 10 53 10       	movsd  0x10(%rbx),%xmm2
   1d6cf:	66 0f 2f c3          	comisd %xmm3,%xmm0
   1d6d3:	f2 0f 58 c8          	addsd  %xmm0,%xmm1
   1d6d7:	0f 86 45 06 00 00    	jbe    1dd22 <lua_close@@LUA_5.4+0x7212>
   1d6dd:	66 0f 2f d1          	comisd %xmm1,%xmm2
   1d6e1:	0f 93 c0             	setae  %al
   1d6e4:	84 c0                	test   %al,%al
   1d6e6:	0f 84 6a e2 ff ff    	je     1b956 <lua_close@@LUA_5.4+0x4e46>
   1d6ec:	44 89 e0             	mov    %r12d,%eax
   1d6ef:	c6 43 38 13          	movb   $0x13,0x38(%rbx)
   1d6f3:	c1 e8 0f             	shr    $0xf,%eax
   1d6f6:	f2 0f 11 0b          	movsd  %xmm1,(%rbx)
   1d6fa:	48 c1 e0 02          	shl    $0x2,%rax
   1d6fe:	f2 0f 11 4b 30       	movsd  %xmm1,0x30(%rbx)
   1d703:	49 29 c5             	sub    %rax,%r13
   1d706:	e9 4b e2 ff ff       	jmp    1b956 <lua_close@@LUA_5.4+0x4e46>
   1d70b:	48 39 58 40          	cmp    %rbx,0x40(%rax)
   1d70f:	0f 84 1c 07 00 00    	je     1de31 <lua_close@@LUA_5.4+0x7321>
   1d715:	c7 45 28 01 00 00 00 	movl   $0x1,0x28(%rbp)
   1d71c:	e9 d8 e1 ff ff       	jmp    1b8f9 <lua_close@@LUA_5.4+0x4de9>
   1d721:	31 d2                	xor    %edx,%edx
   1d723:	48 83 f9 c1          	cmp    $0xffffffffffffffc1,%rcx
   1d727:	0f 8c 31 f2 ff ff    	jl     1c95e <lua_close@@LUA_5.4+0x5e4e>
   1d72d:	48 63 d6             	movslq %esi,%rdx
   1d730:	f7 d9                	neg    %ecx
   1d732:	48 d3 ea             	shr    %cl,%rdx
   1d735:	e9 24 f2 ff ff       	jmp    1c95e <lua_close@@LUA_5.4+0x5e4e>
   1d73a:	89 f1                	mov    %esi,%ecx
   1d73c:	f7 d9                	neg    %ecx
   1d73e:	48 d3 e8             	shr    %cl,%rax
   1d741:	31 c9                	xor    %ecx,%ecx
   1d743:	83 fe c0             	cmp    $0xffffffc0,%esi
   1d746:	48 0f 4e c1          	cmovle %rcx,%rax
   1d74a:	e9 dd f8 ff ff       	jmp    1d02c <lua_close@@LUA_5.4+0x651c>
   1d74f:	f2 0f 10 00          	movsd  (%rax),%xmm0
   1d753:	0f b6 42 08          	movzbl 0x8(%rdx),%eax
   1d757:	3c 13                	cmp    $0x13,%al
   1d759:	0f 85 22 ef ff ff    	jne    1c681 <lua_close@@LUA_5.4+0x5b71>
   1d75f:	f2 0f 10 0a          	movsd  (%rdx),%xmm1
   1d763:	e9 85 f0 ff ff       	jmp    1c7ed <lua_close@@LUA_5.4+0x5cdd>
   1d768:	f2 0f 10 00          	movsd  (%rax),%xmm0
   1d76c:	0f b6 42 08          	movzbl 0x8(%rdx),%eax
   1d770:	3c 13                	cmp    $0x13,%al
   1d772:	0f 85 e9 f4 ff ff    	jne    1cc61 <lua_close@@LUA_5.4+0x6151>
   1d778:	f2 0f 10 0a          	movsd  (%rdx),%xmm1
   1d77c:	e9 f1 f4 ff ff       	jmp    1cc72 <lua_close@@LUA_5.4+0x6162>
   1d781:	0f b6 70 08          	movzbl 0x8(%rax),%esi
   1d785:	48 8b 12             	mov    (%rdx),%rdx
   1d788:	49 8d 4d 04          	lea    0x4(%r13),%rcx
   1d78c:	40 80 fe 03          	cmp    $0x3,%sil
   1d790:	0f 84 1c 07 00 00    	je     1deb2 <lua_close@@LUA_5.4+0x73a2>
   1d796:	40 80 fe 13          	cmp    $0x13,%sil
   1d79a:	0f 85 d0 ec ff ff    	jne    1c470 <lua_close@@LUA_5.4+0x5960>
   1d7a0:	66 0f ef c0          	pxor   %xmm0,%xmm0
   1d7a4:	f2 48 0f 2a c2       	cvtsi2sd %rdx,%xmm0
   1d7a9:	f2 0f 10 08          	movsd  (%rax),%xmm1
   1d7ad:	e9 5c f6 ff ff       	jmp    1ce0e <lua_close@@LUA_5.4+0x62fe>
   1d7b2:	0f b6 70 08          	movzbl 0x8(%rax),%esi
   1d7b6:	48 8b 12             	mov    (%rdx),%rdx
   1d7b9:	49 8d 4d 04          	lea    0x4(%r13),%rcx
   1d7bd:	40 80 fe 03          	cmp    $0x3,%sil
   1d7c1:	0f 84 b6 06 00 00    	je     1de7d <lua_close@@LUA_5.4+0x736d>
   1d7c7:	40 80 fe 13          	cmp    $0x13,%sil
   1d7cb:	0f 85 9f ec ff ff    	jne    1c470 <lua_close@@LUA_5.4+0x5960>
   1d7d1:	66 0f ef c0          	pxor   %xmm0,%xmm0
   1d7d5:	f2 48 0f 2a c2       	cvtsi2sd %rdx,%xmm0
   1d7da:	f2 0f 10 08          	movsd  (%rax),%xmm1
   1d7de:	e9 ab f6 ff ff       	jmp    1ce8e <lua_close@@LUA_5.4+0x637e>
   1d7e3:	f2 0f 10 00          	movsd  (%rax),%xmm0
   1d7e7:	e9 d7 ef ff ff       	jmp    1c7c3 <lua_close@@LUA_5.4+0x5cb3>
   1d7ec:	48 63 c2             	movslq %edx,%rax
   1d7ef:	48 39 03             	cmp    %rax,(%rbx)
   1d7f2:	0f 9d c0             	setge  %al
   1d7f5:	0f b6 c0             	movzbl %al,%eax
   1d7f8:	e9 9b e1 ff ff       	jmp    1b998 <lua_close@@LUA_5.4+0x4e88>
   1d7fd:	48 63 c2             	movslq %edx,%rax
   1d800:	48 39 03             	cmp    %rax,(%rbx)
   1d803:	0f 9e c0             	setle  %al
   1d806:	0f b6 c0             	movzbl %al,%eax
   1d809:	e9 8a e1 ff ff       	jmp    1b998 <lua_close@@LUA_5.4+0x4e88>
   1d80e:	0f b6 72 08          	movzbl 0x8(%rdx),%esi
   1d812:	49 8d 4d 04          	lea    0x4(%r13),%rcx
   1d816:	40 80 fe 03          	cmp    $0x3,%sil
   1d81a:	0f 84 f2 0e 00 00    	je     1e712 <lua_close@@LUA_5.4+0x7c02>
   1d820:	48 8b 00             	mov    (%rax),%rax
   1d823:	40 80 fe 13          	cmp    $0x13,%sil
   1d827:	0f 85 43 ec ff ff    	jne    1c470 <lua_close@@LUA_5.4+0x5960>
   1d82d:	66 0f ef c0          	pxor   %xmm0,%xmm0
   1d831:	f2 48 0f 2a c0       	cvtsi2sd %rax,%xmm0
   1d836:	f2 0f 10 0a          	movsd  (%rdx),%xmm1
   1d83a:	e9 d0 f8 ff ff       	jmp    1d10f <lua_close@@LUA_5.4+0x65ff>
   1d83f:	0f b6 72 08          	movzbl 0x8(%rdx),%esi
   1d843:	48 8b 00             	mov    (%rax),%rax
   1d846:	49 8d 4d 04          	lea    0x4(%r13),%rcx
   1d84a:	40 80 fe 03          	cmp    $0x3,%sil
   1d84e:	0f 84 47 06 00 00    	je     1de9b <lua_close@@LUA_5.4+0x738b>
   1d854:	40 80 fe 13          	cmp    $0x13,%sil
   1d858:	0f 85 12 ec ff ff    	jne    1c470 <lua_close@@LUA_5.4+0x5960>
   1d85e:	66 0f ef c9          	pxor   %xmm1,%xmm1
   1d862:	f2 48 0f 2a c8       	cvtsi2sd %rax,%xmm1
   1d867:	f2 0f 10 02          	movsd  (%rdx),%xmm0
   1d86b:	e9 9e f5 ff ff       	jmp    1ce0e <lua_close@@LUA_5.4+0x62fe>
   1d870:	48 8b 06             	mov    (%rsi),%rax
   1d873:	c6 43 08 03          	movb   $0x3,0x8(%rbx)
   1d877:	48 f7 d8             	neg    %rax
   1d87a:	48 89 03             	mov    %rax,(%rbx)
   1d87d:	e9 0e dc ff ff       	jmp    1b490 <lua_close@@LUA_5.4+0x4980>
   1d882:	0f b6 42 08          	movzbl 0x8(%rdx),%eax
   1d886:	3c 03                	cmp    $0x3,%al
   1d888:	0f 84 2a 06 00 00    	je     1deb8 <lua_close@@LUA_5.4+0x73a8>
   1d88e:	89 c1                	mov    %eax,%ecx
   1d890:	0f b6 73 08          	movzbl 0x8(%rbx),%esi
   1d894:	83 e1 0f             	and    $0xf,%ecx
   1d897:	80 f9 03             	cmp    $0x3,%cl
   1d89a:	0f 85 c0 e5 ff ff    	jne    1be60 <lua_close@@LUA_5.4+0x5350>
   1d8a0:	40 80 fe 03          	cmp    $0x3,%sil
   1d8a4:	0f 84 90 0e 00 00    	je     1e73a <lua_close@@LUA_5.4+0x7c2a>
   1d8aa:	f2 0f 10 03          	movsd  (%rbx),%xmm0
   1d8ae:	3c 13                	cmp    $0x13,%al
   1d8b0:	0f 84 aa 0d 00 00    	je     1e660 <lua_close@@LUA_5.4+0x7b50>
   1d8b6:	48 b9 00 00 00 00 00 	movabs $0x40000000000000,%rcx
   1d8bd:	00 40 00 
   1d8c0:	48 8b 02             	mov    (%rdx),%rax
   1d8c3:	48 ba 00 00 00 00 00 	movabs $0x20000000000000,%rdx
   1d8ca:	00 20 00 
   1d8cd:	48 01 c2             	add    %rax,%rdx
   1d8d0:	48 39 d1             	cmp    %rdx,%rcx
   1d8d3:	0f 82 8c 0f 00 00    	jb     1e865 <lua_close@@LUA_5.4+0x7d55>
   1d8d9:	66 0f ef c9          	pxor   %xmm1,%xmm1
   1d8dd:	f2 48 0f 2a c8       	cvtsi2sd %rax,%xmm1
   1d8e2:	31 c0                	xor    %eax,%eax
   1d8e4:	66 0f 2f c8          	comisd %xmm0,%xmm1
   1d8e8:	0f 97 c0             	seta   %al
   1d8eb:	e9 a8 e0 ff ff       	jmp    1b998 <lua_close@@LUA_5.4+0x4e88>
   1d8f0:	0f b6 42 08          	movzbl 0x8(%rdx),%eax
   1d8f4:	3c 03                	cmp    $0x3,%al
   1d8f6:	0f 84 cd 05 00 00    	je     1dec9 <lua_close@@LUA_5.4+0x73b9>
   1d8fc:	89 c1                	mov    %eax,%ecx
   1d8fe:	83 e1 0f             	and    $0xf,%ecx
   1d901:	80 f9 03             	cmp    $0x3,%cl
   1d904:	0f 85 de e4 ff ff    	jne    1bde8 <lua_close@@LUA_5.4+0x52d8>
   1d90a:	80 7b 08 03          	cmpb   $0x3,0x8(%rbx)
   1d90e:	0f 84 70 0e 00 00    	je     1e784 <lua_close@@LUA_5.4+0x7c74>
   1d914:	f2 0f 10 03          	movsd  (%rbx),%xmm0
   1d918:	3c 13                	cmp    $0x13,%al
   1d91a:	0f 84 52 0d 00 00    	je     1e672 <lua_close@@LUA_5.4+0x7b62>
   1d920:	48 b9 00 00 00 00 00 	movabs $0x40000000000000,%rcx
   1d927:	00 40 00 
   1d92a:	48 8b 02             	mov    (%rdx),%rax
   1d92d:	48 ba 00 00 00 00 00 	movabs $0x20000000000000,%rdx
   1d934:	00 20 00 
   1d937:	48 01 c2             	add    %rax,%rdx
   1d93a:	48 39 d1             	cmp    %rdx,%rcx
   1d93d:	0f 82 7b 0f 00 00    	jb     1e8be <lua_close@@LUA_5.4+0x7dae>
   1d943:	66 0f ef c9          	pxor   %xmm1,%xmm1
   1d947:	f2 48 0f 2a c8       	cvtsi2sd %rax,%xmm1
   1d94c:	31 c0                	xor    %eax,%eax
   1d94e:	66 0f 2f c8          	comisd %xmm0,%xmm1
   1d952:	0f 93 c0             	setae  %al
   1d955:	e9 3e e0 ff ff       	jmp    1b998 <lua_close@@LUA_5.4+0x4e88>
   1d95a:	48 63 c2             	movslq %edx,%rax
   1d95d:	48 39 03             	cmp    %rax,(%rbx)
   1d960:	0f 9c c0             	setl   %al
   1d963:	0f b6 c0             	movzbl %al,%eax
   1d966:	e9 2d e0 ff ff       	jmp    1b998 <lua_close@@LUA_5.4+0x4e88>
   1d96b:	31 c9                	xor    %ecx,%ecx
   1d96d:	48 98                	cltq
   1d96f:	48 39 03             	cmp    %rax,(%rbx)
   1d972:	0f 94 c1             	sete   %cl
   1d975:	e9 da e3 ff ff       	jmp    1bd54 <lua_close@@LUA_5.4+0x5244>
   1d97a:	31 c9                	xor    %ecx,%ecx
   1d97c:	41 80 79 08 45       	cmpb   $0x45,0x8(%r9)
   1d981:	48 8b 32             	mov    (%rdx),%rsi
   1d984:	0f 85 8d e9 ff ff    	jne    1c317 <lua_close@@LUA_5.4+0x5807>
   1d98a:	49 8b 39             	mov    (%r9),%rdi
   1d98d:	48 8d 4e ff          	lea    -0x1(%rsi),%rcx
   1d991:	8b 47 0c             	mov    0xc(%rdi),%eax
   1d994:	48 39 c1             	cmp    %rax,%rcx
   1d997:	0f 83 83 0e 00 00    	jae    1e820 <lua_close@@LUA_5.4+0x7d10>
   1d99d:	48 8b 47 10          	mov    0x10(%rdi),%rax
   1d9a1:	48 c1 e6 04          	shl    $0x4,%rsi
   1d9a5:	48 8d 4c 30 f0       	lea    -0x10(%rax,%rsi,1),%rcx
   1d9aa:	f6 41 08 0f          	testb  $0xf,0x8(%rcx)
   1d9ae:	0f 95 c0             	setne  %al
   1d9b1:	84 c0                	test   %al,%al
   1d9b3:	0f 84 5e e9 ff ff    	je     1c317 <lua_close@@LUA_5.4+0x5807>
   1d9b9:	48 8b 01             	mov    (%rcx),%rax
   1d9bc:	48 89 03             	mov    %rax,(%rbx)
   1d9bf:	0f b6 41 08          	movzbl 0x8(%rcx),%eax
   1d9c3:	88 43 08             	mov    %al,0x8(%rbx)
   1d9c6:	e9 c5 da ff ff       	jmp    1b490 <lua_close@@LUA_5.4+0x4980>
   1d9cb:	0f b6 72 08          	movzbl 0x8(%rdx),%esi
   1d9cf:	48 8b 00             	mov    (%rax),%rax
   1d9d2:	49 8d 4d 04          	lea    0x4(%r13),%rcx
   1d9d6:	40 80 fe 03          	cmp    $0x3,%sil
   1d9da:	0f 84 e0 0c 00 00    	je     1e6c0 <lua_close@@LUA_5.4+0x7bb0>
   1d9e0:	40 80 fe 13          	cmp    $0x13,%sil
   1d9e4:	0f 85 86 ea ff ff    	jne    1c470 <lua_close@@LUA_5.4+0x5960>
   1d9ea:	66 0f ef c0          	pxor   %xmm0,%xmm0
   1d9ee:	f2 0f 10 0a          	movsd  (%rdx),%xmm1
   1d9f2:	f2 48 0f 2a c0       	cvtsi2sd %rax,%xmm0
   1d9f7:	e9 0d f5 ff ff       	jmp    1cf09 <lua_close@@LUA_5.4+0x63f9>
   1d9fc:	0f b6 70 08          	movzbl 0x8(%rax),%esi
   1da00:	49 8d 4d 04          	lea    0x4(%r13),%rcx
   1da04:	40 80 fe 03          	cmp    $0x3,%sil
   1da08:	0f 84 74 04 00 00    	je     1de82 <lua_close@@LUA_5.4+0x7372>
   1da0e:	48 8b 12             	mov    (%rdx),%rdx
   1da11:	40 80 fe 13          	cmp    $0x13,%sil
   1da15:	0f 85 55 ea ff ff    	jne    1c470 <lua_close@@LUA_5.4+0x5960>
   1da1b:	66 0f ef c9          	pxor   %xmm1,%xmm1
   1da1f:	f2 48 0f 2a ca       	cvtsi2sd %rdx,%xmm1
   1da24:	f2 0f 10 00          	movsd  (%rax),%xmm0
   1da28:	e9 a1 ee ff ff       	jmp    1c8ce <lua_close@@LUA_5.4+0x5dbe>
   1da2d:	0f b6 42 08          	movzbl 0x8(%rdx),%eax
   1da31:	49 8d 4d 04          	lea    0x4(%r13),%rcx
   1da35:	3c 03                	cmp    $0x3,%al
   1da37:	0f 84 b8 0c 00 00    	je     1e6f5 <lua_close@@LUA_5.4+0x7be5>
   1da3d:	48 8b 36             	mov    (%rsi),%rsi
   1da40:	3c 13                	cmp    $0x13,%al
   1da42:	0f 85 28 ea ff ff    	jne    1c470 <lua_close@@LUA_5.4+0x5960>
   1da48:	66 0f ef c0          	pxor   %xmm0,%xmm0
   1da4c:	f2 0f 10 0a          	movsd  (%rdx),%xmm1
   1da50:	f2 48 0f 2a c6       	cvtsi2sd %rsi,%xmm0
   1da55:	e9 af f4 ff ff       	jmp    1cf09 <lua_close@@LUA_5.4+0x63f9>
   1da5a:	0f b6 72 08          	movzbl 0x8(%rdx),%esi
   1da5e:	49 8d 4d 04          	lea    0x4(%r13),%rcx
   1da62:	40 80 fe 03          	cmp    $0x3,%sil
   1da66:	0f 84 f8 03 00 00    	je     1de64 <lua_close@@LUA_5.4+0x7354>
   1da6c:	48 8b 00             	mov    (%rax),%rax
   1da6f:	40 80 fe 13          	cmp    $0x13,%sil
   1da73:	0f 85 f7 e9 ff ff    	jne    1c470 <lua_close@@LUA_5.4+0x5960>
   1da79:	66 0f ef c9          	pxor   %xmm1,%xmm1
   1da7d:	f2 48 0f 2a c8       	cvtsi2sd %rax,%xmm1
   1da82:	f2 0f 10 02          	movsd  (%rdx),%xmm0
   1da86:	e9 43 ee ff ff       	jmp    1c8ce <lua_close@@LUA_5.4+0x5dbe>
   1da8b:	0f b6 72 08          	movzbl 0x8(%rdx),%esi
   1da8f:	48 8b 00             	mov    (%rax),%rax
   1da92:	49 8d 4d 04          	lea    0x4(%r13),%rcx
   1da96:	40 80 fe 03          	cmp    $0x3,%sil
   1da9a:	0f 84 ae 03 00 00    	je     1de4e <lua_close@@LUA_5.4+0x733e>
   1daa0:	40 80 fe 13          	cmp    $0x13,%sil
   1daa4:	0f 85 c6 e9 ff ff    	jne    1c470 <lua_close@@LUA_5.4+0x5960>
   1daaa:	66 0f ef c0          	pxor   %xmm0,%xmm0
   1daae:	f2 48 0f 2a c0       	cvtsi2sd %rax,%xmm0
   1dab3:	f2 0f 10 0a          	movsd  (%rdx),%xmm1
   1dab7:	e9 d2 f3 ff ff       	jmp    1ce8e <lua_close@@LUA_5.4+0x637e>
   1dabc:	0f b6 70 08          	movzbl 0x8(%rax),%esi
   1dac0:	49 8d 4d 04          	lea    0x4(%r13),%rcx
   1dac4:	40 80 fe 03          	cmp    $0x3,%sil
   1dac8:	0f 84 b6 0b 00 00    	je     1e684 <lua_close@@LUA_5.4+0x7b74>
   1dace:	48 8b 12             	mov    (%rdx),%rdx
   1dad1:	40 80 fe 13          	cmp    $0x13,%sil
   1dad5:	0f 85 95 e9 ff ff    	jne    1c470 <lua_close@@LUA_5.4+0x5960>
   1dadb:	66 0f ef c0          	pxor   %xmm0,%xmm0
   1dadf:	f2 48 0f 2a c2       	cvtsi2sd %rdx,%xmm0
   1dae4:	f2 0f 10 08          	movsd  (%rax),%xmm1
   1dae8:	e9 c1 f0 ff ff       	jmp    1cbae <lua_close@@LUA_5.4+0x609e>
   1daed:	48 63 c2             	movslq %edx,%rax
   1daf0:	48 39 03             	cmp    %rax,(%rbx)
   1daf3:	0f 9f c0             	setg   %al
   1daf6:	0f b6 c0             	movzbl %al,%eax
   1daf9:	e9 9a de ff ff       	jmp    1b998 <lua_close@@LUA_5.4+0x4e88>
   1dafe:	4d 63 e4             	movslq %r12d,%r12
   1db01:	4c 03 20             	add    (%rax),%r12
   1db04:	c6 43 08 03          	movb   $0x3,0x8(%rbx)
   1db08:	4c 89 23             	mov    %r12,(%rbx)
   1db0b:	e9 c5 e9 ff ff       	jmp    1c4d5 <lua_close@@LUA_5.4+0x59c5>
   1db10:	f2 0f 10 00          	movsd  (%rax),%xmm0
   1db14:	e9 5a f9 ff ff       	jmp    1d473 <lua_close@@LUA_5.4+0x6963>
   1db19:	4c 89 ff             	mov    %r15,%rdi
   1db1c:	44 89 44 24 18       	mov    %r8d,0x18(%rsp)
   1db21:	4c 89 54 24 10       	mov    %r10,0x10(%rsp)
   1db26:	e8 25 a5 ff ff       	call   18050 <lua_close@@LUA_5.4+0x1540>
   1db2b:	44 8b 44 24 18       	mov    0x18(%rsp),%r8d
   1db30:	4c 8b 54 24 10       	mov    0x10(%rsp),%r10
   1db35:	e9 c8 ea ff ff       	jmp    1c602 <lua_close@@LUA_5.4+0x5af2>
   1db3a:	4c 89 ff             	mov    %r15,%rdi
   1db3d:	89 4c 24 28          	mov    %ecx,0x28(%rsp)
   1db41:	89 54 24 20          	mov    %edx,0x20(%rsp)
   1db45:	e8 c6 a8 ff ff       	call   18410 <lua_close@@LUA_5.4+0x1900>
   1db4a:	48 8b 74 24 18       	mov    0x18(%rsp),%rsi
   1db4f:	8b 54 24 20          	mov    0x20(%rsp),%edx
   1db53:	8b 4c 24 28          	mov    0x28(%rsp),%ecx
   1db57:	4c 8b 54 24 30       	mov    0x30(%rsp),%r10
   1db5c:	44 8b 44 24 38       	mov    0x38(%rsp),%r8d
   1db61:	e9 16 df ff ff       	jmp    1ba7c <lua_close@@LUA_5.4+0x4f6c>
   1db66:	48 8b 45 08          	mov    0x8(%rbp),%rax
   1db6a:	4c 89 6d 20          	mov    %r13,0x20(%rbp)
   1db6e:	45 89 e0             	mov    %r12d,%r8d
   1db71:	31 c9                	xor    %ecx,%ecx
   1db73:	4c 89 54 24 10       	mov    %r10,0x10(%rsp)
   1db78:	41 b9 14 00 00 00    	mov    $0x14,%r9d
   1db7e:	41 c1 e8 18          	shr    $0x18,%r8d
   1db82:	49 89 47 10          	mov    %rax,0x10(%r15)
   1db86:	48 89 de             	mov    %rbx,%rsi
   1db89:	4c 89 ff             	mov    %r15,%rdi
   1db8c:	e8 5f b1 ff ff       	call   18cf0 <lua_close@@LUA_5.4+0x21e0>
   1db91:	44 8b 45 28          	mov    0x28(%rbp),%r8d
   1db95:	4c 8b 54 24 10       	mov    0x10(%rsp),%r10
   1db9a:	e9 f9 dd ff ff       	jmp    1b998 <lua_close@@LUA_5.4+0x4e88>
   1db9f:	48 8b 45 08          	mov    0x8(%rbp),%rax
   1dba3:	4c 89 6d 20          	mov    %r13,0x20(%rbp)
   1dba7:	41 b9 14 00 00 00    	mov    $0x14,%r9d
   1dbad:	4c 89 54 24 10       	mov    %r10,0x10(%rsp)
   1dbb2:	49 89 47 10          	mov    %rax,0x10(%r15)
   1dbb6:	45 89 e0             	mov    %r12d,%r8d
   1dbb9:	b9 01 00 00 00       	mov    $0x1,%ecx
   1dbbe:	41 c1 e8 18          	shr    $0x18,%r8d
   1dbc2:	eb c2                	jmp    1db86 <lua_close@@LUA_5.4+0x7076>
   1dbc4:	48 8b 45 08          	mov    0x8(%rbp),%rax
   1dbc8:	4c 89 6d 20          	mov    %r13,0x20(%rbp)
   1dbcc:	41 b8 12 00 00 00    	mov    $0x12,%r8d
   1dbd2:	4c 89 54 24 10       	mov    %r10,0x10(%rsp)
   1dbd7:	49 89 47 10          	mov    %rax,0x10(%r15)
   1dbdb:	48 89 d9             	mov    %rbx,%rcx
   1dbde:	48 89 f2             	mov    %rsi,%rdx
   1dbe1:	4c 89 ff             	mov    %r15,%rdi
   1dbe4:	e8 e7 ae ff ff       	call   18ad0 <lua_close@@LUA_5.4+0x1fc0>
   1dbe9:	44 8b 45 28          	mov    0x28(%rbp),%r8d
   1dbed:	4c 8b 54 24 10       	mov    0x10(%rsp),%r10
   1dbf2:	e9 99 d8 ff ff       	jmp    1b490 <lua_close@@LUA_5.4+0x4980>
   1dbf7:	48 8b 45 08          	mov    0x8(%rbp),%rax
   1dbfb:	45 89 e0             	mov    %r12d,%r8d
   1dbfe:	4c 89 6d 20          	mov    %r13,0x20(%rbp)
   1dc02:	31 c9                	xor    %ecx,%ecx
   1dc04:	4c 89 54 24 10       	mov    %r10,0x10(%rsp)
   1dc09:	41 b9 15 00 00 00    	mov    $0x15,%r9d
   1dc0f:	41 c1 e8 18          	shr    $0x18,%r8d
   1dc13:	49 89 47 10          	mov    %rax,0x10(%r15)
   1dc17:	e9 6a ff ff ff       	jmp    1db86 <lua_close@@LUA_5.4+0x7076>
   1dc1c:	48 8b 45 08          	mov    0x8(%rbp),%rax
   1dc20:	4c 89 6d 20          	mov    %r13,0x20(%rbp)
   1dc24:	41 b9 15 00 00 00    	mov    $0x15,%r9d
   1dc2a:	4c 89 54 24 10       	mov    %r10,0x10(%rsp)
   1dc2f:	49 89 47 10          	mov    %rax,0x10(%r15)
   1dc33:	eb 81                	jmp    1dbb6 <lua_close@@LUA_5.4+0x70a6>
   1dc35:	f2 0f 10 08          	movsd  (%rax),%xmm1
   1dc39:	0f b6 42 08          	movzbl 0x8(%rdx),%eax
   1dc3d:	3c 13                	cmp    $0x13,%al
   1dc3f:	0f 84 3d fe ff ff    	je     1da82 <lua_close@@LUA_5.4+0x6f72>
   1dc45:	3c 03                	cmp    $0x3,%al
   1dc47:	0f 85 23 e8 ff ff    	jne    1c470 <lua_close@@LUA_5.4+0x5960>
   1dc4d:	66 0f ef c0          	pxor   %xmm0,%xmm0
   1dc51:	f2 48 0f 2a 02       	cvtsi2sdq (%rdx),%xmm0
   1dc56:	e9 73 ec ff ff       	jmp    1c8ce <lua_close@@LUA_5.4+0x5dbe>
   1dc5b:	66 0f 2f d0          	comisd %xmm0,%xmm2
   1dc5f:	0f 86 f3 f2 ff ff    	jbe    1cf58 <lua_close@@LUA_5.4+0x6448>
   1dc65:	66 0f 2f ca          	comisd %xmm2,%xmm1
   1dc69:	0f 87 e0 f2 ff ff    	ja     1cf4f <lua_close@@LUA_5.4+0x643f>
   1dc6f:	e9 e4 f2 ff ff       	jmp    1cf58 <lua_close@@LUA_5.4+0x6448>
   1dc74:	48 8b 0b             	mov    (%rbx),%rcx
   1dc77:	49 89 4a f0          	mov    %rcx,-0x10(%r10)
   1dc7b:	0f b6 4b 08          	movzbl 0x8(%rbx),%ecx
   1dc7f:	88 4a 08             	mov    %cl,0x8(%rdx)
   1dc82:	4d 89 57 10          	mov    %r10,0x10(%r15)
   1dc86:	83 f8 01             	cmp    $0x1,%eax
   1dc89:	0f 8e 5c db ff ff    	jle    1b7eb <lua_close@@LUA_5.4+0x4cdb>
   1dc8f:	83 e8 02             	sub    $0x2,%eax
   1dc92:	49 8d 52 08          	lea    0x8(%r10),%rdx
   1dc96:	48 89 c1             	mov    %rax,%rcx
   1dc99:	48 c1 e1 04          	shl    $0x4,%rcx
   1dc9d:	49 8d 74 0a 18       	lea    0x18(%r10,%rcx,1),%rsi
   1dca2:	c6 02 00             	movb   $0x0,(%rdx)
   1dca5:	48 83 c2 10          	add    $0x10,%rdx
   1dca9:	48 39 f2             	cmp    %rsi,%rdx
   1dcac:	75 f4                	jne    1dca2 <lua_close@@LUA_5.4+0x7192>
   1dcae:	48 83 c0 01          	add    $0x1,%rax
   1dcb2:	48 c1 e0 04          	shl    $0x4,%rax
   1dcb6:	4c 01 d0             	add    %r10,%rax
   1dcb9:	49 89 47 10          	mov    %rax,0x10(%r15)
   1dcbd:	41 c6 44 0a 08 00    	movb   $0x0,0x8(%r10,%rcx,1)
   1dcc3:	e9 23 db ff ff       	jmp    1b7eb <lua_close@@LUA_5.4+0x4cdb>
   1dcc8:	66 0f ef c0          	pxor   %xmm0,%xmm0
   1dccc:	f2 41 0f 2a c4       	cvtsi2sd %r12d,%xmm0
   1dcd1:	f2 0f 58 00          	addsd  (%rax),%xmm0
   1dcd5:	c6 43 08 13          	movb   $0x13,0x8(%rbx)
   1dcd9:	f2 0f 11 03          	movsd  %xmm0,(%rbx)
   1dcdd:	e9 f3 e7 ff ff       	jmp    1c4d5 <lua_close@@LUA_5.4+0x59c5>
   1dce2:	44 89 44 24 18       	mov    %r8d,0x18(%rsp)
   1dce7:	4c 89 54 24 10       	mov    %r10,0x10(%rsp)
   1dcec:	e8 5f 98 fe ff       	call   7550 <pow@plt>
   1dcf1:	44 8b 44 24 18       	mov    0x18(%rsp),%r8d
   1dcf6:	4c 8b 54 24 10       	mov    0x10(%rsp),%r10
   1dcfb:	e9 7a ef ff ff       	jmp    1cc7a <lua_close@@LUA_5.4+0x616a>
   1dd00:	48 8b 45 00          	mov    0x0(%rbp),%rax
   1dd04:	4c 8d 50 10          	lea    0x10(%rax),%r10
   1dd08:	44 89 e0             	mov    %r12d,%eax
   1dd0b:	c1 e8 07             	shr    $0x7,%eax
   1dd0e:	0f b6 c0             	movzbl %al,%eax
   1dd11:	48 c1 e0 04          	shl    $0x4,%rax
   1dd15:	49 8d 1c 02          	lea    (%r10,%rax,1),%rbx
   1dd19:	48 8d 4b 40          	lea    0x40(%rbx),%rcx
   1dd1d:	e9 1f d8 ff ff       	jmp    1b541 <lua_close@@LUA_5.4+0x4a31>
   1dd22:	66 0f 2f ca          	comisd %xmm2,%xmm1
   1dd26:	0f 93 c0             	setae  %al
   1dd29:	e9 b6 f9 ff ff       	jmp    1d6e4 <lua_close@@LUA_5.4+0x6bd4>
   1dd2e:	f2 0f 10 08          	movsd  (%rax),%xmm1
   1dd32:	e9 3b ef ff ff       	jmp    1cc72 <lua_close@@LUA_5.4+0x6162>
   1dd37:	f2 0f 10 08          	movsd  (%rax),%xmm1
   1dd3b:	e9 ad ea ff ff       	jmp    1c7ed <lua_close@@LUA_5.4+0x5cdd>
   1dd40:	0f b6 42 08          	movzbl 0x8(%rdx),%eax
   1dd44:	e9 b3 fb ff ff       	jmp    1d8fc <lua_close@@LUA_5.4+0x6dec>
   1dd49:	0f b6 42 08          	movzbl 0x8(%rdx),%eax
   1dd4d:	e9 3c fb ff ff       	jmp    1d88e <lua_close@@LUA_5.4+0x6d7e>
   1dd52:	44 89 44 24 20       	mov    %r8d,0x20(%rsp)
   1dd57:	4c 89 54 24 18       	mov    %r10,0x18(%rsp)
   1dd5c:	4c 89 4c 24 10       	mov    %r9,0x10(%rsp)
   1dd61:	e8 ea 9a ff ff       	call   17850 <lua_close@@LUA_5.4+0xd40>
   1dd66:	44 8b 44 24 20       	mov    0x20(%rsp),%r8d
   1dd6b:	4c 8b 54 24 18       	mov    0x18(%rsp),%r10
   1dd70:	4c 8b 4c 24 10       	mov    0x10(%rsp),%r9
   1dd75:	e9 4a e5 ff ff       	jmp    1c2c4 <lua_close@@LUA_5.4+0x57b4>
   1dd7a:	44 89 44 24 28       	mov    %r8d,0x28(%rsp)
   1dd7f:	4c 89 54 24 20       	mov    %r10,0x20(%rsp)
   1dd84:	89 54 24 18          	mov    %edx,0x18(%rsp)
   1dd88:	48 89 4c 24 10       	mov    %rcx,0x10(%rsp)
   1dd8d:	e8 be 9a ff ff       	call   17850 <lua_close@@LUA_5.4+0xd40>
   1dd92:	44 8b 44 24 28       	mov    0x28(%rsp),%r8d
   1dd97:	4c 8b 54 24 20       	mov    0x20(%rsp),%r10
   1dd9c:	8b 54 24 18          	mov    0x18(%rsp),%edx
   1dda0:	48 8b 4c 24 10       	mov    0x10(%rsp),%rcx
   1dda5:	48 89 c6             	mov    %rax,%rsi
   1dda8:	e9 a7 ef ff ff       	jmp    1cd54 <lua_close@@LUA_5.4+0x6244>
   1ddad:	49 8b 39             	mov    (%r9),%rdi
   1ddb0:	48 89 d6             	mov    %rdx,%rsi
   1ddb3:	44 89 44 24 28       	mov    %r8d,0x28(%rsp)
   1ddb8:	4c 89 54 24 20       	mov    %r10,0x20(%rsp)
   1ddbd:	4c 89 4c 24 18       	mov    %r9,0x18(%rsp)
   1ddc2:	48 89 54 24 10       	mov    %rdx,0x10(%rsp)
   1ddc7:	e8 54 9c ff ff       	call   17a20 <lua_close@@LUA_5.4+0xf10>
   1ddcc:	48 8b 54 24 10       	mov    0x10(%rsp),%rdx
   1ddd1:	4c 8b 4c 24 18       	mov    0x18(%rsp),%r9
   1ddd6:	f6 40 08 0f          	testb  $0xf,0x8(%rax)
   1ddda:	48 89 c1             	mov    %rax,%rcx
   1dddd:	4c 8b 54 24 20       	mov    0x20(%rsp),%r10
   1dde2:	44 8b 44 24 28       	mov    0x28(%rsp),%r8d
   1dde7:	0f 95 c0             	setne  %al
   1ddea:	e9 c2 fb ff ff       	jmp    1d9b1 <lua_close@@LUA_5.4+0x6ea1>
   1ddef:	48 8b 3b             	mov    (%rbx),%rdi
   1ddf2:	48 89 d6             	mov    %rdx,%rsi
   1ddf5:	44 89 44 24 28       	mov    %r8d,0x28(%rsp)
   1ddfa:	4c 89 54 24 20       	mov    %r10,0x20(%rsp)
   1ddff:	48 89 4c 24 18       	mov    %rcx,0x18(%rsp)
   1de04:	48 89 54 24 10       	mov    %rdx,0x10(%rsp)
   1de09:	e8 12 9c ff ff       	call   17a20 <lua_close@@LUA_5.4+0xf10>
   1de0e:	48 8b 54 24 10       	mov    0x10(%rsp),%rdx
   1de13:	48 8b 4c 24 18       	mov    0x18(%rsp),%rcx
   1de18:	f6 40 08 0f          	testb  $0xf,0x8(%rax)
   1de1c:	4c 8b 54 24 20       	mov    0x20(%rsp),%r10
   1de21:	44 8b 44 24 28       	mov    0x28(%rsp),%r8d
   1de26:	0f 84 ad f3 ff ff    	je     1d1d9 <lua_close@@LUA_5.4+0x66c9>
   1de2c:	e9 f7 f7 ff ff       	jmp    1d628 <lua_close@@LUA_5.4+0x6b18>
   1de31:	80 78 0b 00          	cmpb   $0x0,0xb(%rax)
   1de35:	0f 84 1a 0a 00 00    	je     1e855 <lua_close@@LUA_5.4+0x7d45>
   1de3b:	c7 45 28 01 00 00 00 	movl   $0x1,0x28(%rbp)
   1de42:	49 83 c2 10          	add    $0x10,%r10
   1de46:	45 31 c0             	xor    %r8d,%r8d
   1de49:	e9 b3 d5 ff ff       	jmp    1b401 <lua_close@@LUA_5.4+0x48f1>
   1de4e:	48 2b 02             	sub    (%rdx),%rax
   1de51:	49 89 cd             	mov    %rcx,%r13
   1de54:	c6 43 08 03          	movb   $0x3,0x8(%rbx)
   1de58:	48 8d 49 04          	lea    0x4(%rcx),%rcx
   1de5c:	48 89 03             	mov    %rax,(%rbx)
   1de5f:	e9 0c e6 ff ff       	jmp    1c470 <lua_close@@LUA_5.4+0x5960>
   1de64:	48 8b 12             	mov    (%rdx),%rdx
   1de67:	48 03 10             	add    (%rax),%rdx
   1de6a:	49 89 cd             	mov    %rcx,%r13
   1de6d:	48 89 13             	mov    %rdx,(%rbx)
   1de70:	48 8d 49 04          	lea    0x4(%rcx),%rcx
   1de74:	c6 43 08 03          	movb   $0x3,0x8(%rbx)
   1de78:	e9 f3 e5 ff ff       	jmp    1c470 <lua_close@@LUA_5.4+0x5960>
   1de7d:	48 2b 10             	sub    (%rax),%rdx
   1de80:	eb e8                	jmp    1de6a <lua_close@@LUA_5.4+0x735a>
   1de82:	48 8b 00             	mov    (%rax),%rax
   1de85:	48 03 02             	add    (%rdx),%rax
   1de88:	49 89 cd             	mov    %rcx,%r13
   1de8b:	c6 43 08 03          	movb   $0x3,0x8(%rbx)
   1de8f:	48 89 03             	mov    %rax,(%rbx)
   1de92:	48 8d 49 04          	lea    0x4(%rcx),%rcx
   1de96:	e9 d5 e5 ff ff       	jmp    1c470 <lua_close@@LUA_5.4+0x5960>
   1de9b:	48 0f af 02          	imul   (%rdx),%rax
   1de9f:	49 89 cd             	mov    %rcx,%r13
   1dea2:	c6 43 08 03          	movb   $0x3,0x8(%rbx)
   1dea6:	48 8d 49 04          	lea    0x4(%rcx),%rcx
   1deaa:	48 89 03             	mov    %rax,(%rbx)
   1dead:	e9 be e5 ff ff       	jmp    1c470 <lua_close@@LUA_5.4+0x5960>
   1deb2:	48 0f af 10          	imul   (%rax),%rdx
   1deb6:	eb b2                	jmp    1de6a <lua_close@@LUA_5.4+0x735a>
   1deb8:	48 8b 02             	mov    (%rdx),%rax
   1debb:	48 39 03             	cmp    %rax,(%rbx)
   1debe:	0f 9c c0             	setl   %al
   1dec1:	0f b6 c0             	movzbl %al,%eax
   1dec4:	e9 cf da ff ff       	jmp    1b998 <lua_close@@LUA_5.4+0x4e88>
   1dec9:	48 8b 02             	mov    (%rdx),%rax
   1decc:	48 39 03             	cmp    %rax,(%rbx)
   1decf:	0f 9e c0             	setle  %al
   1ded2:	0f b6 c0             	movzbl %al,%eax
   1ded5:	e9 be da ff ff       	jmp    1b998 <lua_close@@LUA_5.4+0x4e88>
   1deda:	48 8b 32             	mov    (%rdx),%rsi
   1dedd:	48 8b 3b             	mov    (%rbx),%rdi
   1dee0:	4c 89 54 24 10       	mov    %r10,0x10(%rsp)
   1dee5:	e8 16 bb ff ff       	call   19a00 <lua_close@@LUA_5.4+0x2ef0>
   1deea:	4c 8b 54 24 10       	mov    0x10(%rsp),%r10
   1deef:	c1 e8 1f             	shr    $0x1f,%eax
   1def2:	e9 31 df ff ff       	jmp    1be28 <lua_close@@LUA_5.4+0x5318>
   1def7:	3c 13                	cmp    $0x13,%al
   1def9:	0f 84 07 0c 00 00    	je     1eb06 <lua_close@@LUA_5.4+0x7ff6>
   1deff:	48 8b 45 08          	mov    0x8(%rbp),%rax
   1df03:	4c 89 6d 20          	mov    %r13,0x20(%rbp)
   1df07:	41 b8 13 00 00 00    	mov    $0x13,%r8d
   1df0d:	4c 89 54 24 10       	mov    %r10,0x10(%rsp)
   1df12:	49 89 47 10          	mov    %rax,0x10(%r15)
   1df16:	e9 c0 fc ff ff       	jmp    1dbdb <lua_close@@LUA_5.4+0x70cb>
   1df1b:	48 89 ee             	mov    %rbp,%rsi
   1df1e:	4c 89 ff             	mov    %r15,%rdi
   1df21:	e8 0a f9 fe ff       	call   d830 <lua_getinfo@@LUA_5.4+0x1370>
   1df26:	4c 89 ee             	mov    %r13,%rsi
   1df29:	4c 89 ff             	mov    %r15,%rdi
   1df2c:	41 c7 87 b4 00 00 00 	movl   $0x1,0xb4(%r15)
   1df33:	01 00 00 00 
   1df37:	e8 64 ee fe ff       	call   cda0 <lua_getinfo@@LUA_5.4+0x8e0>
   1df3c:	41 89 c0             	mov    %eax,%r8d
   1df3f:	e9 89 d6 ff ff       	jmp    1b5cd <lua_close@@LUA_5.4+0x4abd>
   1df44:	48 83 c3 10          	add    $0x10,%rbx
   1df48:	ba 01 00 00 00       	mov    $0x1,%edx
   1df4d:	48 89 ee             	mov    %rbp,%rsi
   1df50:	4c 89 ff             	mov    %r15,%rdi
   1df53:	49 89 5f 10          	mov    %rbx,0x10(%r15)
   1df57:	4c 89 6d 20          	mov    %r13,0x20(%rbp)
   1df5b:	e8 e0 f9 fe ff       	call   d940 <lua_getinfo@@LUA_5.4+0x1480>
   1df60:	41 b8 01 00 00 00    	mov    $0x1,%r8d
   1df66:	e9 80 d8 ff ff       	jmp    1b7eb <lua_close@@LUA_5.4+0x4cdb>
   1df6b:	4d 89 ec             	mov    %r13,%r12
   1df6e:	80 f9 13             	cmp    $0x13,%cl
   1df71:	0f 85 11 e2 ff ff    	jne    1c188 <lua_close@@LUA_5.4+0x5678>
   1df77:	f2 0f 10 00          	movsd  (%rax),%xmm0
   1df7b:	f2 0f 10 1d 7d 5a 01 	movsd  0x15a7d(%rip),%xmm3        # 33a00 <lua_ident@@LUA_5.4+0x15a0>
   1df82:	00 
   1df83:	f2 0f 10 25 d5 50 01 	movsd  0x150d5(%rip),%xmm4        # 33060 <lua_ident@@LUA_5.4+0xc00>
   1df8a:	00 
   1df8b:	66 0f 28 c8          	movapd %xmm0,%xmm1
   1df8f:	66 0f 28 d0          	movapd %xmm0,%xmm2
   1df93:	66 0f 54 cb          	andpd  %xmm3,%xmm1
   1df97:	66 0f 2e e1          	ucomisd %xmm1,%xmm4
   1df9b:	0f 87 62 0e 00 00    	ja     1ee03 <lua_close@@LUA_5.4+0x82f3>
   1dfa1:	66 0f 2e c2          	ucomisd %xmm2,%xmm0
   1dfa5:	0f 8a 39 0b 00 00    	jp     1eae4 <lua_close@@LUA_5.4+0x7fd4>
   1dfab:	0f 85 33 0b 00 00    	jne    1eae4 <lua_close@@LUA_5.4+0x7fd4>
   1dfb1:	66 0f 2f 15 97 56 01 	comisd 0x15697(%rip),%xmm2        # 33650 <lua_ident@@LUA_5.4+0x11f0>
   1dfb8:	00 
   1dfb9:	0f 82 25 0b 00 00    	jb     1eae4 <lua_close@@LUA_5.4+0x7fd4>
   1dfbf:	f2 0f 10 05 91 56 01 	movsd  0x15691(%rip),%xmm0        # 33658 <lua_ident@@LUA_5.4+0x11f8>
   1dfc6:	00 
   1dfc7:	66 0f 2f c2          	comisd %xmm2,%xmm0
   1dfcb:	0f 86 13 0b 00 00    	jbe    1eae4 <lua_close@@LUA_5.4+0x7fd4>
   1dfd1:	f2 48 0f 2c c2       	cvttsd2si %xmm2,%rax
   1dfd6:	e9 33 e7 ff ff       	jmp    1c70e <lua_close@@LUA_5.4+0x5bfe>
   1dfdb:	0f 1f 44 00 00       	nopl   0x0(%rax,%rax,1)
   1dfe0:	4d 89 ec             	mov    %r13,%r12
   1dfe3:	80 f9 13             	cmp    $0x13,%cl
   1dfe6:	0f 85 9c e1 ff ff    	jne    1c188 <lua_close@@LUA_5.4+0x5678>
   1dfec:	f2 0f 10 00          	movsd  (%rax),%xmm0
   1dff0:	f2 0f 10 1d 08 5a 01 	movsd  0x15a08(%rip),%xmm3        # 33a00 <lua_ident@@LUA_5.4+0x15a0>
   1dff7:	00 
   1dff8:	f2 0f 10 25 60 50 01 	movsd  0x15060(%rip),%xmm4        # 33060 <lua_ident@@LUA_5.4+0xc00>
   1dfff:	00 
   1e000:	66 0f 28 c8          	movapd %xmm0,%xmm1
   1e004:	66 0f 28 d0          	movapd %xmm0,%xmm2
   1e008:	66 0f 54 cb          	andpd  %xmm3,%xmm1
   1e00c:	66 0f 2e e1          	ucomisd %xmm1,%xmm4
   1e010:	0f 87 b5 0d 00 00    	ja     1edcb <lua_close@@LUA_5.4+0x82bb>
   1e016:	66 0f 2e c2          	ucomisd %xmm2,%xmm0
   1e01a:	0f 8a c4 0a 00 00    	jp     1eae4 <lua_close@@LUA_5.4+0x7fd4>
   1e020:	0f 85 be 0a 00 00    	jne    1eae4 <lua_close@@LUA_5.4+0x7fd4>
   1e026:	66 0f 2f 15 22 56 01 	comisd 0x15622(%rip),%xmm2        # 33650 <lua_ident@@LUA_5.4+0x11f0>
   1e02d:	00 
   1e02e:	0f 82 b0 0a 00 00    	jb     1eae4 <lua_close@@LUA_5.4+0x7fd4>
   1e034:	f2 0f 10 05 1c 56 01 	movsd  0x1561c(%rip),%xmm0        # 33658 <lua_ident@@LUA_5.4+0x11f8>
   1e03b:	00 
   1e03c:	66 0f 2f c2          	comisd %xmm2,%xmm0
   1e040:	0f 86 9e 0a 00 00    	jbe    1eae4 <lua_close@@LUA_5.4+0x7fd4>
   1e046:	f2 48 0f 2c c2       	cvttsd2si %xmm2,%rax
   1e04b:	e9 83 e1 ff ff       	jmp    1c1d3 <lua_close@@LUA_5.4+0x56c3>
   1e050:	4d 89 ec             	mov    %r13,%r12
   1e053:	80 fa 13             	cmp    $0x13,%dl
   1e056:	0f 85 2c e1 ff ff    	jne    1c188 <lua_close@@LUA_5.4+0x5678>
   1e05c:	f2 0f 10 00          	movsd  (%rax),%xmm0
   1e060:	f2 0f 10 1d 98 59 01 	movsd  0x15998(%rip),%xmm3        # 33a00 <lua_ident@@LUA_5.4+0x15a0>
   1e067:	00 
   1e068:	f2 0f 10 25 f0 4f 01 	movsd  0x14ff0(%rip),%xmm4        # 33060 <lua_ident@@LUA_5.4+0xc00>
   1e06f:	00 
   1e070:	66 0f 28 c8          	movapd %xmm0,%xmm1
   1e074:	66 0f 28 d0          	movapd %xmm0,%xmm2
   1e078:	66 0f 54 cb          	andpd  %xmm3,%xmm1
   1e07c:	66 0f 2e e1          	ucomisd %xmm1,%xmm4
   1e080:	0f 87 0d 0d 00 00    	ja     1ed93 <lua_close@@LUA_5.4+0x8283>
   1e086:	66 0f 2e c2          	ucomisd %xmm2,%xmm0
   1e08a:	0f 8a 54 0a 00 00    	jp     1eae4 <lua_close@@LUA_5.4+0x7fd4>
   1e090:	0f 85 4e 0a 00 00    	jne    1eae4 <lua_close@@LUA_5.4+0x7fd4>
   1e096:	66 0f 2f 15 b2 55 01 	comisd 0x155b2(%rip),%xmm2        # 33650 <lua_ident@@LUA_5.4+0x11f0>
   1e09d:	00 
   1e09e:	0f 82 40 0a 00 00    	jb     1eae4 <lua_close@@LUA_5.4+0x7fd4>
   1e0a4:	f2 0f 10 05 ac 55 01 	movsd  0x155ac(%rip),%xmm0        # 33658 <lua_ident@@LUA_5.4+0x11f8>
   1e0ab:	00 
   1e0ac:	66 0f 2f c2          	comisd %xmm2,%xmm0
   1e0b0:	0f 86 2e 0a 00 00    	jbe    1eae4 <lua_close@@LUA_5.4+0x7fd4>
   1e0b6:	f2 48 0f 2c ca       	cvttsd2si %xmm2,%rcx
   1e0bb:	e9 81 e8 ff ff       	jmp    1c941 <lua_close@@LUA_5.4+0x5e31>
   1e0c0:	4d 89 ec             	mov    %r13,%r12
   1e0c3:	80 f9 13             	cmp    $0x13,%cl
   1e0c6:	0f 85 bc e0 ff ff    	jne    1c188 <lua_close@@LUA_5.4+0x5678>
   1e0cc:	f2 0f 10 00          	movsd  (%rax),%xmm0
   1e0d0:	f2 0f 10 1d 28 59 01 	movsd  0x15928(%rip),%xmm3        # 33a00 <lua_ident@@LUA_5.4+0x15a0>
   1e0d7:	00 
   1e0d8:	f2 0f 10 25 80 4f 01 	movsd  0x14f80(%rip),%xmm4        # 33060 <lua_ident@@LUA_5.4+0xc00>
   1e0df:	00 
   1e0e0:	66 0f 28 c8          	movapd %xmm0,%xmm1
   1e0e4:	66 0f 28 d0          	movapd %xmm0,%xmm2
   1e0e8:	66 0f 54 cb          	andpd  %xmm3,%xmm1
   1e0ec:	66 0f 2e e1          	ucomisd %xmm1,%xmm4
   1e0f0:	0f 87 65 0c 00 00    	ja     1ed5b <lua_close@@LUA_5.4+0x824b>
   1e0f6:	66 0f 2e c2          	ucomisd %xmm2,%xmm0
   1e0fa:	0f 8a e4 09 00 00    	jp     1eae4 <lua_close@@LUA_5.4+0x7fd4>
   1e100:	0f 85 de 09 00 00    	jne    1eae4 <lua_close@@LUA_5.4+0x7fd4>
   1e106:	66 0f 2f 15 42 55 01 	comisd 0x15542(%rip),%xmm2        # 33650 <lua_ident@@LUA_5.4+0x11f0>
   1e10d:	00 
   1e10e:	0f 82 d0 09 00 00    	jb     1eae4 <lua_close@@LUA_5.4+0x7fd4>
   1e114:	f2 0f 10 05 3c 55 01 	movsd  0x1553c(%rip),%xmm0        # 33658 <lua_ident@@LUA_5.4+0x11f8>
   1e11b:	00 
   1e11c:	66 0f 2f c2          	comisd %xmm2,%xmm0
   1e120:	0f 86 be 09 00 00    	jbe    1eae4 <lua_close@@LUA_5.4+0x7fd4>
   1e126:	f2 48 0f 2c c2       	cvttsd2si %xmm2,%rax
   1e12b:	e9 6b ef ff ff       	jmp    1d09b <lua_close@@LUA_5.4+0x658b>
   1e130:	4c 89 ea             	mov    %r13,%rdx
   1e133:	80 f9 13             	cmp    $0x13,%cl
   1e136:	0f 85 99 e3 ff ff    	jne    1c4d5 <lua_close@@LUA_5.4+0x59c5>
   1e13c:	f2 0f 10 00          	movsd  (%rax),%xmm0
   1e140:	f2 0f 10 1d b8 58 01 	movsd  0x158b8(%rip),%xmm3        # 33a00 <lua_ident@@LUA_5.4+0x15a0>
   1e147:	00 
   1e148:	f2 0f 10 25 10 4f 01 	movsd  0x14f10(%rip),%xmm4        # 33060 <lua_ident@@LUA_5.4+0xc00>
   1e14f:	00 
   1e150:	66 0f 28 c8          	movapd %xmm0,%xmm1
   1e154:	66 0f 28 d0          	movapd %xmm0,%xmm2
   1e158:	66 0f 54 cb          	andpd  %xmm3,%xmm1
   1e15c:	66 0f 2e e1          	ucomisd %xmm1,%xmm4
   1e160:	0f 87 bd 0b 00 00    	ja     1ed23 <lua_close@@LUA_5.4+0x8213>
   1e166:	66 0f 2e c2          	ucomisd %xmm2,%xmm0
   1e16a:	0f 8a 62 e3 ff ff    	jp     1c4d2 <lua_close@@LUA_5.4+0x59c2>
   1e170:	0f 85 5c e3 ff ff    	jne    1c4d2 <lua_close@@LUA_5.4+0x59c2>
   1e176:	66 0f 2f 15 d2 54 01 	comisd 0x154d2(%rip),%xmm2        # 33650 <lua_ident@@LUA_5.4+0x11f0>
   1e17d:	00 
   1e17e:	0f 82 4e e3 ff ff    	jb     1c4d2 <lua_close@@LUA_5.4+0x59c2>
   1e184:	f2 0f 10 05 cc 54 01 	movsd  0x154cc(%rip),%xmm0        # 33658 <lua_ident@@LUA_5.4+0x11f8>
   1e18b:	00 
   1e18c:	66 0f 2f c2          	comisd %xmm2,%xmm0
   1e190:	0f 86 3c e3 ff ff    	jbe    1c4d2 <lua_close@@LUA_5.4+0x59c2>
   1e196:	f2 48 0f 2c c2       	cvttsd2si %xmm2,%rax
   1e19b:	e9 6c ee ff ff       	jmp    1d00c <lua_close@@LUA_5.4+0x64fc>
   1e1a0:	4d 89 ec             	mov    %r13,%r12
   1e1a3:	80 f9 13             	cmp    $0x13,%cl
   1e1a6:	0f 85 dc df ff ff    	jne    1c188 <lua_close@@LUA_5.4+0x5678>
   1e1ac:	f2 0f 10 00          	movsd  (%rax),%xmm0
   1e1b0:	f2 0f 10 1d 48 58 01 	movsd  0x15848(%rip),%xmm3        # 33a00 <lua_ident@@LUA_5.4+0x15a0>
   1e1b7:	00 
   1e1b8:	f2 0f 10 25 a0 4e 01 	movsd  0x14ea0(%rip),%xmm4        # 33060 <lua_ident@@LUA_5.4+0xc00>
   1e1bf:	00 
   1e1c0:	66 0f 28 c8          	movapd %xmm0,%xmm1
   1e1c4:	66 0f 28 d0          	movapd %xmm0,%xmm2
   1e1c8:	66 0f 54 cb          	andpd  %xmm3,%xmm1
   1e1cc:	66 0f 2e e1          	ucomisd %xmm1,%xmm4
   1e1d0:	0f 87 15 0b 00 00    	ja     1eceb <lua_close@@LUA_5.4+0x81db>
   1e1d6:	66 0f 2e c2          	ucomisd %xmm2,%xmm0
   1e1da:	0f 8a 04 09 00 00    	jp     1eae4 <lua_close@@LUA_5.4+0x7fd4>
   1e1e0:	0f 85 fe 08 00 00    	jne    1eae4 <lua_close@@LUA_5.4+0x7fd4>
   1e1e6:	66 0f 2f 15 62 54 01 	comisd 0x15462(%rip),%xmm2        # 33650 <lua_ident@@LUA_5.4+0x11f0>
   1e1ed:	00 
   1e1ee:	0f 82 f0 08 00 00    	jb     1eae4 <lua_close@@LUA_5.4+0x7fd4>
   1e1f4:	f2 0f 10 05 5c 54 01 	movsd  0x1545c(%rip),%xmm0        # 33658 <lua_ident@@LUA_5.4+0x11f8>
   1e1fb:	00 
   1e1fc:	66 0f 2f c2          	comisd %xmm2,%xmm0
   1e200:	0f 86 de 08 00 00    	jbe    1eae4 <lua_close@@LUA_5.4+0x7fd4>
   1e206:	f2 48 0f 2c c2       	cvttsd2si %xmm2,%rax
   1e20b:	e9 06 e9 ff ff       	jmp    1cb16 <lua_close@@LUA_5.4+0x6006>
   1e210:	4d 89 ec             	mov    %r13,%r12
   1e213:	80 f9 13             	cmp    $0x13,%cl
   1e216:	0f 85 6c df ff ff    	jne    1c188 <lua_close@@LUA_5.4+0x5678>
   1e21c:	f2 0f 10 00          	movsd  (%rax),%xmm0
   1e220:	f2 0f 10 1d d8 57 01 	movsd  0x157d8(%rip),%xmm3        # 33a00 <lua_ident@@LUA_5.4+0x15a0>
   1e227:	00 
   1e228:	f2 0f 10 25 30 4e 01 	movsd  0x14e30(%rip),%xmm4        # 33060 <lua_ident@@LUA_5.4+0xc00>
   1e22f:	00 
   1e230:	66 0f 28 c8          	movapd %xmm0,%xmm1
   1e234:	66 0f 28 d0          	movapd %xmm0,%xmm2
   1e238:	66 0f 54 cb          	andpd  %xmm3,%xmm1
   1e23c:	66 0f 2e e1          	ucomisd %xmm1,%xmm4
   1e240:	0f 87 6d 0a 00 00    	ja     1ecb3 <lua_close@@LUA_5.4+0x81a3>
   1e246:	66 0f 2e c2          	ucomisd %xmm2,%xmm0
   1e24a:	0f 8a 94 08 00 00    	jp     1eae4 <lua_close@@LUA_5.4+0x7fd4>
   1e250:	0f 85 8e 08 00 00    	jne    1eae4 <lua_close@@LUA_5.4+0x7fd4>
   1e256:	66 0f 2f 15 f2 53 01 	comisd 0x153f2(%rip),%xmm2        # 33650 <lua_ident@@LUA_5.4+0x11f0>
   1e25d:	00 
   1e25e:	0f 82 80 08 00 00    	jb     1eae4 <lua_close@@LUA_5.4+0x7fd4>
   1e264:	f2 0f 10 05 ec 53 01 	movsd  0x153ec(%rip),%xmm0        # 33658 <lua_ident@@LUA_5.4+0x11f8>
   1e26b:	00 
   1e26c:	66 0f 2f c2          	comisd %xmm2,%xmm0
   1e270:	0f 86 6e 08 00 00    	jbe    1eae4 <lua_close@@LUA_5.4+0x7fd4>
   1e276:	f2 48 0f 2c c2       	cvttsd2si %xmm2,%rax
   1e27b:	e9 e6 e4 ff ff       	jmp    1c766 <lua_close@@LUA_5.4+0x5c56>
   1e280:	48 8b 32             	mov    (%rdx),%rsi
   1e283:	48 8b 3b             	mov    (%rbx),%rdi
   1e286:	4c 89 54 24 10       	mov    %r10,0x10(%rsp)
   1e28b:	e8 70 b7 ff ff       	call   19a00 <lua_close@@LUA_5.4+0x2ef0>
   1e290:	4c 8b 54 24 10       	mov    0x10(%rsp),%r10
   1e295:	85 c0                	test   %eax,%eax
   1e297:	0f 9e c0             	setle  %al
   1e29a:	0f b6 c0             	movzbl %al,%eax
   1e29d:	e9 86 db ff ff       	jmp    1be28 <lua_close@@LUA_5.4+0x5318>
   1e2a2:	49 89 5f 10          	mov    %rbx,0x10(%r15)
   1e2a6:	31 d2                	xor    %edx,%edx
   1e2a8:	48 89 ee             	mov    %rbp,%rsi
   1e2ab:	4c 89 ff             	mov    %r15,%rdi
   1e2ae:	4c 89 6d 20          	mov    %r13,0x20(%rbp)
   1e2b2:	e8 89 f6 fe ff       	call   d940 <lua_getinfo@@LUA_5.4+0x1480>
   1e2b7:	e9 a4 fc ff ff       	jmp    1df60 <lua_close@@LUA_5.4+0x7450>
   1e2bc:	48 8b 74 24 10       	mov    0x10(%rsp),%rsi
   1e2c1:	4c 89 ff             	mov    %r15,%rdi
   1e2c4:	e8 d7 ea fe ff       	call   cda0 <lua_getinfo@@LUA_5.4+0x8e0>
   1e2c9:	41 89 c0             	mov    %eax,%r8d
   1e2cc:	48 8b 45 00          	mov    0x0(%rbp),%rax
   1e2d0:	4c 8d 50 10          	lea    0x10(%rax),%r10
   1e2d4:	e9 21 d8 ff ff       	jmp    1bafa <lua_close@@LUA_5.4+0x4fea>
   1e2d9:	4d 89 ec             	mov    %r13,%r12
   1e2dc:	80 f9 13             	cmp    $0x13,%cl
   1e2df:	0f 85 a3 de ff ff    	jne    1c188 <lua_close@@LUA_5.4+0x5678>
   1e2e5:	f2 0f 10 00          	movsd  (%rax),%xmm0
   1e2e9:	f2 0f 10 1d 0f 57 01 	movsd  0x1570f(%rip),%xmm3        # 33a00 <lua_ident@@LUA_5.4+0x15a0>
   1e2f0:	00 
   1e2f1:	f2 0f 10 25 67 4d 01 	movsd  0x14d67(%rip),%xmm4        # 33060 <lua_ident@@LUA_5.4+0xc00>
   1e2f8:	00 
   1e2f9:	66 0f 28 c8          	movapd %xmm0,%xmm1
   1e2fd:	66 0f 28 d0          	movapd %xmm0,%xmm2
   1e301:	66 0f 54 cb          	andpd  %xmm3,%xmm1
   1e305:	66 0f 2e e1          	ucomisd %xmm1,%xmm4
   1e309:	0f 87 6c 09 00 00    	ja     1ec7b <lua_close@@LUA_5.4+0x816b>
   1e30f:	66 0f 2e c2          	ucomisd %xmm2,%xmm0
   1e313:	0f 8a cb 07 00 00    	jp     1eae4 <lua_close@@LUA_5.4+0x7fd4>
   1e319:	0f 85 c5 07 00 00    	jne    1eae4 <lua_close@@LUA_5.4+0x7fd4>
   1e31f:	66 0f 2f 15 29 53 01 	comisd 0x15329(%rip),%xmm2        # 33650 <lua_ident@@LUA_5.4+0x11f0>
   1e326:	00 
   1e327:	0f 82 b7 07 00 00    	jb     1eae4 <lua_close@@LUA_5.4+0x7fd4>
   1e32d:	f2 0f 10 05 23 53 01 	movsd  0x15323(%rip),%xmm0        # 33658 <lua_ident@@LUA_5.4+0x11f8>
   1e334:	00 
   1e335:	66 0f 2f c2          	comisd %xmm2,%xmm0
   1e339:	0f 86 a5 07 00 00    	jbe    1eae4 <lua_close@@LUA_5.4+0x7fd4>
   1e33f:	f2 48 0f 2c c2       	cvttsd2si %xmm2,%rax
   1e344:	e9 2a de ff ff       	jmp    1c173 <lua_close@@LUA_5.4+0x5663>
   1e349:	0f 1f 80 00 00 00 00 	nopl   0x0(%rax)
   1e350:	4d 89 ec             	mov    %r13,%r12
   1e353:	80 f9 13             	cmp    $0x13,%cl
   1e356:	0f 85 2c de ff ff    	jne    1c188 <lua_close@@LUA_5.4+0x5678>
   1e35c:	f2 0f 10 00          	movsd  (%rax),%xmm0
   1e360:	f2 0f 10 1d 98 56 01 	movsd  0x15698(%rip),%xmm3        # 33a00 <lua_ident@@LUA_5.4+0x15a0>
   1e367:	00 
   1e368:	f2 0f 10 25 f0 4c 01 	movsd  0x14cf0(%rip),%xmm4        # 33060 <lua_ident@@LUA_5.4+0xc00>
   1e36f:	00 
   1e370:	66 0f 28 c8          	movapd %xmm0,%xmm1
   1e374:	66 0f 28 d0          	movapd %xmm0,%xmm2
   1e378:	66 0f 54 cb          	andpd  %xmm3,%xmm1
   1e37c:	66 0f 2e e1          	ucomisd %xmm1,%xmm4
   1e380:	0f 87 bd 08 00 00    	ja     1ec43 <lua_close@@LUA_5.4+0x8133>
   1e386:	66 0f 2e c2          	ucomisd %xmm2,%xmm0
   1e38a:	0f 8a 54 07 00 00    	jp     1eae4 <lua_close@@LUA_5.4+0x7fd4>
   1e390:	0f 85 4e 07 00 00    	jne    1eae4 <lua_close@@LUA_5.4+0x7fd4>
   1e396:	66 0f 2f 15 b2 52 01 	comisd 0x152b2(%rip),%xmm2        # 33650 <lua_ident@@LUA_5.4+0x11f0>
   1e39d:	00 
   1e39e:	0f 82 40 07 00 00    	jb     1eae4 <lua_close@@LUA_5.4+0x7fd4>
   1e3a4:	f2 0f 10 05 ac 52 01 	movsd  0x152ac(%rip),%xmm0        # 33658 <lua_ident@@LUA_5.4+0x11f8>
   1e3ab:	00 
   1e3ac:	66 0f 2f c2          	comisd %xmm2,%xmm0
   1e3b0:	0f 86 2e 07 00 00    	jbe    1eae4 <lua_close@@LUA_5.4+0x7fd4>
   1e3b6:	f2 48 0f 2c c2       	cvttsd2si %xmm2,%rax
   1e3bb:	e9 8e e6 ff ff       	jmp    1ca4e <lua_close@@LUA_5.4+0x5f3e>
   1e3c0:	4d 89 ec             	mov    %r13,%r12
   1e3c3:	80 f9 13             	cmp    $0x13,%cl
   1e3c6:	0f 85 bc dd ff ff    	jne    1c188 <lua_close@@LUA_5.4+0x5678>
   1e3cc:	f2 0f 10 00          	movsd  (%rax),%xmm0
   1e3d0:	f2 0f 10 1d 28 56 01 	movsd  0x15628(%rip),%xmm3        # 33a00 <lua_ident@@LUA_5.4+0x15a0>
   1e3d7:	00 
   1e3d8:	f2 0f 10 25 80 4c 01 	movsd  0x14c80(%rip),%xmm4        # 33060 <lua_ident@@LUA_5.4+0xc00>
   1e3df:	00 
   1e3e0:	66 0f 28 c8          	movapd %xmm0,%xmm1
   1e3e4:	66 0f 28 d0          	movapd %xmm0,%xmm2
   1e3e8:	66 0f 54 cb          	andpd  %xmm3,%xmm1
   1e3ec:	66 0f 2e e1          	ucomisd %xmm1,%xmm4
   1e3f0:	0f 87 15 08 00 00    	ja     1ec0b <lua_close@@LUA_5.4+0x80fb>
   1e3f6:	66 0f 2e c2          	ucomisd %xmm2,%xmm0
   1e3fa:	0f 8a e4 06 00 00    	jp     1eae4 <lua_close@@LUA_5.4+0x7fd4>
   1e400:	0f 85 de 06 00 00    	jne    1eae4 <lua_close@@LUA_5.4+0x7fd4>
   1e406:	66 0f 2f 15 42 52 01 	comisd 0x15242(%rip),%xmm2        # 33650 <lua_ident@@LUA_5.4+0x11f0>
   1e40d:	00 
   1e40e:	0f 82 d0 06 00 00    	jb     1eae4 <lua_close@@LUA_5.4+0x7fd4>
   1e414:	f2 0f 10 05 3c 52 01 	movsd  0x1523c(%rip),%xmm0        # 33658 <lua_ident@@LUA_5.4+0x11f8>
   1e41b:	00 
   1e41c:	66 0f 2f c2          	comisd %xmm2,%xmm0
   1e420:	0f 86 be 06 00 00    	jbe    1eae4 <lua_close@@LUA_5.4+0x7fd4>
   1e426:	f2 48 0f 2c c2       	cvttsd2si %xmm2,%rax
   1e42b:	e9 8e e6 ff ff       	jmp    1cabe <lua_close@@LUA_5.4+0x5fae>
   1e430:	4d 89 ec             	mov    %r13,%r12
   1e433:	80 f9 13             	cmp    $0x13,%cl
   1e436:	0f 85 4c dd ff ff    	jne    1c188 <lua_close@@LUA_5.4+0x5678>
   1e43c:	f2 0f 10 02          	movsd  (%rdx),%xmm0
   1e440:	f2 0f 10 1d b8 55 01 	movsd  0x155b8(%rip),%xmm3        # 33a00 <lua_ident@@LUA_5.4+0x15a0>
   1e447:	00 
   1e448:	f2 0f 10 25 10 4c 01 	movsd  0x14c10(%rip),%xmm4        # 33060 <lua_ident@@LUA_5.4+0xc00>
   1e44f:	00 
   1e450:	66 0f 28 c8          	movapd %xmm0,%xmm1
   1e454:	66 0f 28 d0          	movapd %xmm0,%xmm2
   1e458:	66 0f 54 cb          	andpd  %xmm3,%xmm1
   1e45c:	66 0f 2e e1          	ucomisd %xmm1,%xmm4
   1e460:	0f 87 6d 07 00 00    	ja     1ebd3 <lua_close@@LUA_5.4+0x80c3>
   1e466:	66 0f 2e c2          	ucomisd %xmm2,%xmm0
   1e46a:	0f 8a 74 06 00 00    	jp     1eae4 <lua_close@@LUA_5.4+0x7fd4>
   1e470:	0f 85 6e 06 00 00    	jne    1eae4 <lua_close@@LUA_5.4+0x7fd4>
   1e476:	66 0f 2f 15 d2 51 01 	comisd 0x151d2(%rip),%xmm2        # 33650 <lua_ident@@LUA_5.4+0x11f0>
   1e47d:	00 
   1e47e:	0f 82 60 06 00 00    	jb     1eae4 <lua_close@@LUA_5.4+0x7fd4>
   1e484:	f2 0f 10 05 cc 51 01 	movsd  0x151cc(%rip),%xmm0        # 33658 <lua_ident@@LUA_5.4+0x11f8>
   1e48b:	00 
   1e48c:	66 0f 2f c2          	comisd %xmm2,%xmm0
   1e490:	0f 86 4e 06 00 00    	jbe    1eae4 <lua_close@@LUA_5.4+0x7fd4>
   1e496:	f2 48 0f 2c d2       	cvttsd2si %xmm2,%rdx
   1e49b:	e9 2e e6 ff ff       	jmp    1cace <lua_close@@LUA_5.4+0x5fbe>
   1e4a0:	4d 89 ec             	mov    %r13,%r12
   1e4a3:	80 f9 13             	cmp    $0x13,%cl
   1e4a6:	0f 85 dc dc ff ff    	jne    1c188 <lua_close@@LUA_5.4+0x5678>
   1e4ac:	f2 0f 10 02          	movsd  (%rdx),%xmm0
   1e4b0:	f2 0f 10 1d 48 55 01 	movsd  0x15548(%rip),%xmm3        # 33a00 <lua_ident@@LUA_5.4+0x15a0>
   1e4b7:	00 
   1e4b8:	f2 0f 10 25 a0 4b 01 	movsd  0x14ba0(%rip),%xmm4        # 33060 <lua_ident@@LUA_5.4+0xc00>
   1e4bf:	00 
   1e4c0:	66 0f 28 c8          	movapd %xmm0,%xmm1
   1e4c4:	66 0f 28 d0          	movapd %xmm0,%xmm2
   1e4c8:	66 0f 54 cb          	andpd  %xmm3,%xmm1
   1e4cc:	66 0f 2e e1          	ucomisd %xmm1,%xmm4
   1e4d0:	0f 87 c5 06 00 00    	ja     1eb9b <lua_close@@LUA_5.4+0x808b>
   1e4d6:	66 0f 2e c2          	ucomisd %xmm2,%xmm0
   1e4da:	0f 8a 04 06 00 00    	jp     1eae4 <lua_close@@LUA_5.4+0x7fd4>
   1e4e0:	0f 85 fe 05 00 00    	jne    1eae4 <lua_close@@LUA_5.4+0x7fd4>
   1e4e6:	66 0f 2f 15 62 51 01 	comisd 0x15162(%rip),%xmm2        # 33650 <lua_ident@@LUA_5.4+0x11f0>
   1e4ed:	00 
   1e4ee:	0f 82 f0 05 00 00    	jb     1eae4 <lua_close@@LUA_5.4+0x7fd4>
   1e4f4:	f2 0f 10 05 5c 51 01 	movsd  0x1515c(%rip),%xmm0        # 33658 <lua_ident@@LUA_5.4+0x11f8>
   1e4fb:	00 
   1e4fc:	66 0f 2f c2          	comisd %xmm2,%xmm0
   1e500:	0f 86 de 05 00 00    	jbe    1eae4 <lua_close@@LUA_5.4+0x7fd4>
   1e506:	f2 48 0f 2c d2       	cvttsd2si %xmm2,%rdx
   1e50b:	e9 0e e2 ff ff       	jmp    1c71e <lua_close@@LUA_5.4+0x5c0e>
   1e510:	4d 89 ec             	mov    %r13,%r12
   1e513:	80 f9 13             	cmp    $0x13,%cl
   1e516:	0f 85 6c dc ff ff    	jne    1c188 <lua_close@@LUA_5.4+0x5678>
   1e51c:	f2 0f 10 02          	movsd  (%rdx),%xmm0
   1e520:	f2 0f 10 1d d8 54 01 	movsd  0x154d8(%rip),%xmm3        # 33a00 <lua_ident@@LUA_5.4+0x15a0>
   1e527:	00 
   1e528:	f2 0f 10 25 30 4b 01 	movsd  0x14b30(%rip),%xmm4        # 33060 <lua_ident@@LUA_5.4+0xc00>
   1e52f:	00 
   1e530:	66 0f 28 c8          	movapd %xmm0,%xmm1
   1e534:	66 0f 28 d0          	movapd %xmm0,%xmm2
   1e538:	66 0f 54 cb          	andpd  %xmm3,%xmm1
   1e53c:	66 0f 2e e1          	ucomisd %xmm1,%xmm4
   1e540:	0f 87 2d 09 00 00    	ja     1ee73 <lua_close@@LUA_5.4+0x8363>
   1e546:	66 0f 2e c2          	ucomisd %xmm2,%xmm0
   1e54a:	0f 8a 94 05 00 00    	jp     1eae4 <lua_close@@LUA_5.4+0x7fd4>
   1e550:	0f 85 8e 05 00 00    	jne    1eae4 <lua_close@@LUA_5.4+0x7fd4>
   1e556:	66 0f 2f 15 f2 50 01 	comisd 0x150f2(%rip),%xmm2        # 33650 <lua_ident@@LUA_5.4+0x11f0>
   1e55d:	00 
   1e55e:	0f 82 80 05 00 00    	jb     1eae4 <lua_close@@LUA_5.4+0x7fd4>
   1e564:	f2 0f 10 05 ec 50 01 	movsd  0x150ec(%rip),%xmm0        # 33658 <lua_ident@@LUA_5.4+0x11f8>
   1e56b:	00 
   1e56c:	66 0f 2f c2          	comisd %xmm2,%xmm0
   1e570:	0f 86 6e 05 00 00    	jbe    1eae4 <lua_close@@LUA_5.4+0x7fd4>
   1e576:	f2 48 0f 2c d2       	cvttsd2si %xmm2,%rdx
   1e57b:	e9 a6 e5 ff ff       	jmp    1cb26 <lua_close@@LUA_5.4+0x6016>
   1e580:	4d 89 ec             	mov    %r13,%r12
   1e583:	80 f9 13             	cmp    $0x13,%cl
   1e586:	0f 85 fc db ff ff    	jne    1c188 <lua_close@@LUA_5.4+0x5678>
   1e58c:	f2 0f 10 02          	movsd  (%rdx),%xmm0
   1e590:	f2 0f 10 1d 68 54 01 	movsd  0x15468(%rip),%xmm3        # 33a00 <lua_ident@@LUA_5.4+0x15a0>
   1e597:	00 
   1e598:	f2 0f 10 25 c0 4a 01 	movsd  0x14ac0(%rip),%xmm4        # 33060 <lua_ident@@LUA_5.4+0xc00>
   1e59f:	00 
   1e5a0:	66 0f 28 c8          	movapd %xmm0,%xmm1
   1e5a4:	66 0f 28 d0          	movapd %xmm0,%xmm2
   1e5a8:	66 0f 54 cb          	andpd  %xmm3,%xmm1
   1e5ac:	66 0f 2e e1          	ucomisd %xmm1,%xmm4
   1e5b0:	0f 87 85 08 00 00    	ja     1ee3b <lua_close@@LUA_5.4+0x832b>
   1e5b6:	66 0f 2e c2          	ucomisd %xmm2,%xmm0
   1e5ba:	0f 8a 24 05 00 00    	jp     1eae4 <lua_close@@LUA_5.4+0x7fd4>
   1e5c0:	0f 85 1e 05 00 00    	jne    1eae4 <lua_close@@LUA_5.4+0x7fd4>
   1e5c6:	66 0f 2f 15 82 50 01 	comisd 0x15082(%rip),%xmm2        # 33650 <lua_ident@@LUA_5.4+0x11f0>
   1e5cd:	00 
   1e5ce:	0f 82 10 05 00 00    	jb     1eae4 <lua_close@@LUA_5.4+0x7fd4>
   1e5d4:	f2 0f 10 05 7c 50 01 	movsd  0x1507c(%rip),%xmm0        # 33658 <lua_ident@@LUA_5.4+0x11f8>
   1e5db:	00 
   1e5dc:	66 0f 2f c2          	comisd %xmm2,%xmm0
   1e5e0:	0f 86 fe 04 00 00    	jbe    1eae4 <lua_close@@LUA_5.4+0x7fd4>
   1e5e6:	f2 48 0f 2c d2       	cvttsd2si %xmm2,%rdx
   1e5eb:	e9 86 e1 ff ff       	jmp    1c776 <lua_close@@LUA_5.4+0x5c66>
   1e5f0:	4d 89 ec             	mov    %r13,%r12
   1e5f3:	80 f9 13             	cmp    $0x13,%cl
   1e5f6:	0f 85 8c db ff ff    	jne    1c188 <lua_close@@LUA_5.4+0x5678>
   1e5fc:	f2 0f 10 02          	movsd  (%rdx),%xmm0
   1e600:	f2 0f 10 1d f8 53 01 	movsd  0x153f8(%rip),%xmm3        # 33a00 <lua_ident@@LUA_5.4+0x15a0>
   1e607:	00 
   1e608:	f2 0f 10 25 50 4a 01 	movsd  0x14a50(%rip),%xmm4        # 33060 <lua_ident@@LUA_5.4+0xc00>
   1e60f:	00 
   1e610:	66 0f 28 c8          	movapd %xmm0,%xmm1
   1e614:	66 0f 28 d0          	movapd %xmm0,%xmm2
   1e618:	66 0f 54 cb          	andpd  %xmm3,%xmm1
   1e61c:	66 0f 2e e1          	ucomisd %xmm1,%xmm4
   1e620:	0f 87 85 08 00 00    	ja     1eeab <lua_close@@LUA_5.4+0x839b>
   1e626:	66 0f 2e c2          	ucomisd %xmm2,%xmm0
   1e62a:	0f 8a b4 04 00 00    	jp     1eae4 <lua_close@@LUA_5.4+0x7fd4>
   1e630:	0f 85 ae 04 00 00    	jne    1eae4 <lua_close@@LUA_5.4+0x7fd4>
   1e636:	66 0f 2f 15 12 50 01 	comisd 0x15012(%rip),%xmm2        # 33650 <lua_ident@@LUA_5.4+0x11f0>
   1e63d:	00 
   1e63e:	0f 82 a0 04 00 00    	jb     1eae4 <lua_close@@LUA_5.4+0x7fd4>
   1e644:	f2 0f 10 05 0c 50 01 	movsd  0x1500c(%rip),%xmm0        # 33658 <lua_ident@@LUA_5.4+0x11f8>
   1e64b:	00 
   1e64c:	66 0f 2f c2          	comisd %xmm2,%xmm0
   1e650:	0f 86 8e 04 00 00    	jbe    1eae4 <lua_close@@LUA_5.4+0x7fd4>
   1e656:	f2 48 0f 2c ca       	cvttsd2si %xmm2,%rcx
   1e65b:	e9 fe e3 ff ff       	jmp    1ca5e <lua_close@@LUA_5.4+0x5f4e>
   1e660:	f2 0f 10 0a          	movsd  (%rdx),%xmm1
   1e664:	31 c0                	xor    %eax,%eax
   1e666:	66 0f 2f c8          	comisd %xmm0,%xmm1
   1e66a:	0f 97 c0             	seta   %al
   1e66d:	e9 26 d3 ff ff       	jmp    1b998 <lua_close@@LUA_5.4+0x4e88>
   1e672:	f2 0f 10 0a          	movsd  (%rdx),%xmm1
   1e676:	31 c0                	xor    %eax,%eax
   1e678:	66 0f 2f c8          	comisd %xmm0,%xmm1
   1e67c:	0f 93 c0             	setae  %al
   1e67f:	e9 14 d3 ff ff       	jmp    1b998 <lua_close@@LUA_5.4+0x4e88>
   1e684:	48 8b 30             	mov    (%rax),%rsi
   1e687:	48 8b 3a             	mov    (%rdx),%rdi
   1e68a:	48 8d 46 01          	lea    0x1(%rsi),%rax
   1e68e:	48 83 f8 01          	cmp    $0x1,%rax
   1e692:	0f 86 8e 00 00 00    	jbe    1e726 <lua_close@@LUA_5.4+0x7c16>
   1e698:	48 89 f8             	mov    %rdi,%rax
   1e69b:	48 99                	cqto
   1e69d:	48 f7 fe             	idiv   %rsi
   1e6a0:	48 31 fe             	xor    %rdi,%rsi
   1e6a3:	79 08                	jns    1e6ad <lua_close@@LUA_5.4+0x7b9d>
   1e6a5:	48 83 fa 01          	cmp    $0x1,%rdx
   1e6a9:	48 83 d0 ff          	adc    $0xffffffffffffffff,%rax
   1e6ad:	49 89 cd             	mov    %rcx,%r13
   1e6b0:	48 89 03             	mov    %rax,(%rbx)
   1e6b3:	48 83 c1 04          	add    $0x4,%rcx
   1e6b7:	c6 43 08 03          	movb   $0x3,0x8(%rbx)
   1e6bb:	e9 b0 dd ff ff       	jmp    1c470 <lua_close@@LUA_5.4+0x5960>
   1e6c0:	48 8b 32             	mov    (%rdx),%rsi
   1e6c3:	48 8d 56 01          	lea    0x1(%rsi),%rdx
   1e6c7:	48 83 fa 01          	cmp    $0x1,%rdx
   1e6cb:	76 38                	jbe    1e705 <lua_close@@LUA_5.4+0x7bf5>
   1e6cd:	48 99                	cqto
   1e6cf:	48 f7 fe             	idiv   %rsi
   1e6d2:	48 85 d2             	test   %rdx,%rdx
   1e6d5:	74 0b                	je     1e6e2 <lua_close@@LUA_5.4+0x7bd2>
   1e6d7:	48 8d 04 32          	lea    (%rdx,%rsi,1),%rax
   1e6db:	48 31 d6             	xor    %rdx,%rsi
   1e6de:	48 0f 48 d0          	cmovs  %rax,%rdx
   1e6e2:	49 89 cd             	mov    %rcx,%r13
   1e6e5:	48 89 13             	mov    %rdx,(%rbx)
   1e6e8:	48 83 c1 04          	add    $0x4,%rcx
   1e6ec:	c6 43 08 03          	movb   $0x3,0x8(%rbx)
   1e6f0:	e9 7b dd ff ff       	jmp    1c470 <lua_close@@LUA_5.4+0x5960>
   1e6f5:	48 8b 06             	mov    (%rsi),%rax
   1e6f8:	48 8b 32             	mov    (%rdx),%rsi
   1e6fb:	48 8d 56 01          	lea    0x1(%rsi),%rdx
   1e6ff:	48 83 fa 01          	cmp    $0x1,%rdx
   1e703:	77 c8                	ja     1e6cd <lua_close@@LUA_5.4+0x7bbd>
   1e705:	48 85 f6             	test   %rsi,%rsi
   1e708:	0f 84 e6 07 00 00    	je     1eef4 <lua_close@@LUA_5.4+0x83e4>
   1e70e:	31 d2                	xor    %edx,%edx
   1e710:	eb d0                	jmp    1e6e2 <lua_close@@LUA_5.4+0x7bd2>
   1e712:	48 8b 32             	mov    (%rdx),%rsi
   1e715:	48 8b 38             	mov    (%rax),%rdi
   1e718:	48 8d 46 01          	lea    0x1(%rsi),%rax
   1e71c:	48 83 f8 01          	cmp    $0x1,%rax
   1e720:	0f 87 72 ff ff ff    	ja     1e698 <lua_close@@LUA_5.4+0x7b88>
   1e726:	48 85 f6             	test   %rsi,%rsi
   1e729:	0f 84 b4 07 00 00    	je     1eee3 <lua_close@@LUA_5.4+0x83d3>
   1e72f:	48 89 f8             	mov    %rdi,%rax
   1e732:	48 f7 d8             	neg    %rax
   1e735:	e9 73 ff ff ff       	jmp    1e6ad <lua_close@@LUA_5.4+0x7b9d>
   1e73a:	48 8b 0b             	mov    (%rbx),%rcx
   1e73d:	48 8b 12             	mov    (%rdx),%rdx
   1e740:	3c 03                	cmp    $0x3,%al
   1e742:	0f 84 a4 03 00 00    	je     1eaec <lua_close@@LUA_5.4+0x7fdc>
   1e748:	48 b8 00 00 00 00 00 	movabs $0x20000000000000,%rax
   1e74f:	00 20 00 
   1e752:	66 48 0f 6e c2       	movq   %rdx,%xmm0
   1e757:	48 ba 00 00 00 00 00 	movabs $0x40000000000000,%rdx
   1e75e:	00 40 00 
   1e761:	48 01 c8             	add    %rcx,%rax
   1e764:	48 39 c2             	cmp    %rax,%rdx
   1e767:	0f 82 cd 02 00 00    	jb     1ea3a <lua_close@@LUA_5.4+0x7f2a>
   1e76d:	66 0f ef c9          	pxor   %xmm1,%xmm1
   1e771:	31 c0                	xor    %eax,%eax
   1e773:	f2 48 0f 2a c9       	cvtsi2sd %rcx,%xmm1
   1e778:	66 0f 2f c1          	comisd %xmm1,%xmm0
   1e77c:	0f 97 c0             	seta   %al
   1e77f:	e9 14 d2 ff ff       	jmp    1b998 <lua_close@@LUA_5.4+0x4e88>
   1e784:	48 8b 0b             	mov    (%rbx),%rcx
   1e787:	48 8b 12             	mov    (%rdx),%rdx
   1e78a:	3c 03                	cmp    $0x3,%al
   1e78c:	0f 84 67 03 00 00    	je     1eaf9 <lua_close@@LUA_5.4+0x7fe9>
   1e792:	48 b8 00 00 00 00 00 	movabs $0x20000000000000,%rax
   1e799:	00 20 00 
   1e79c:	66 48 0f 6e c2       	movq   %rdx,%xmm0
   1e7a1:	48 ba 00 00 00 00 00 	movabs $0x40000000000000,%rdx
   1e7a8:	00 40 00 
   1e7ab:	48 01 c8             	add    %rcx,%rax
   1e7ae:	48 39 c2             	cmp    %rax,%rdx
   1e7b1:	0f 82 fb 01 00 00    	jb     1e9b2 <lua_close@@LUA_5.4+0x7ea2>
   1e7b7:	66 0f ef c9          	pxor   %xmm1,%xmm1
   1e7bb:	31 c0                	xor    %eax,%eax
   1e7bd:	f2 48 0f 2a c9       	cvtsi2sd %rcx,%xmm1
   1e7c2:	66 0f 2f c1          	comisd %xmm1,%xmm0
   1e7c6:	0f 93 c0             	setae  %al
   1e7c9:	e9 ca d1 ff ff       	jmp    1b998 <lua_close@@LUA_5.4+0x4e88>
   1e7ce:	44 89 e0             	mov    %r12d,%eax
   1e7d1:	c1 e8 07             	shr    $0x7,%eax
   1e7d4:	0f b6 c0             	movzbl %al,%eax
   1e7d7:	48 8d 58 01          	lea    0x1(%rax),%rbx
   1e7db:	48 c1 e3 04          	shl    $0x4,%rbx
   1e7df:	48 03 5d 00          	add    0x0(%rbp),%rbx
   1e7e3:	e9 cf cf ff ff       	jmp    1b7b7 <lua_close@@LUA_5.4+0x4ca7>
   1e7e8:	48 89 fe             	mov    %rdi,%rsi
   1e7eb:	48 89 c7             	mov    %rax,%rdi
   1e7ee:	44 89 44 24 28       	mov    %r8d,0x28(%rsp)
   1e7f3:	4c 89 54 24 20       	mov    %r10,0x20(%rsp)
   1e7f8:	48 89 4c 24 18       	mov    %rcx,0x18(%rsp)
   1e7fd:	48 89 54 24 10       	mov    %rdx,0x10(%rsp)
   1e802:	e8 49 90 ff ff       	call   17850 <lua_close@@LUA_5.4+0xd40>
   1e807:	44 8b 44 24 28       	mov    0x28(%rsp),%r8d
   1e80c:	4c 8b 54 24 20       	mov    0x20(%rsp),%r10
   1e811:	48 8b 4c 24 18       	mov    0x18(%rsp),%rcx
   1e816:	48 8b 54 24 10       	mov    0x10(%rsp),%rdx
   1e81b:	e9 fe ed ff ff       	jmp    1d61e <lua_close@@LUA_5.4+0x6b0e>
   1e820:	44 89 44 24 28       	mov    %r8d,0x28(%rsp)
   1e825:	4c 89 54 24 20       	mov    %r10,0x20(%rsp)
   1e82a:	48 89 54 24 18       	mov    %rdx,0x18(%rsp)
   1e82f:	4c 89 4c 24 10       	mov    %r9,0x10(%rsp)
   1e834:	e8 17 90 ff ff       	call   17850 <lua_close@@LUA_5.4+0xd40>
   1e839:	44 8b 44 24 28       	mov    0x28(%rsp),%r8d
   1e83e:	4c 8b 54 24 20       	mov    0x20(%rsp),%r10
   1e843:	48 8b 54 24 18       	mov    0x18(%rsp),%rdx
   1e848:	4c 8b 4c 24 10       	mov    0x10(%rsp),%r9
   1e84d:	48 89 c1             	mov    %rax,%rcx
   1e850:	e9 55 f1 ff ff       	jmp    1d9aa <lua_close@@LUA_5.4+0x6e9a>
   1e855:	48 89 ee             	mov    %rbp,%rsi
   1e858:	4c 89 ff             	mov    %r15,%rdi
   1e85b:	e8 d0 ef fe ff       	call   d830 <lua_getinfo@@LUA_5.4+0x1370>
   1e860:	e9 b0 ee ff ff       	jmp    1d715 <lua_close@@LUA_5.4+0x6c05>
   1e865:	f2 0f 10 1d 93 51 01 	movsd  0x15193(%rip),%xmm3        # 33a00 <lua_ident@@LUA_5.4+0x15a0>
   1e86c:	00 
   1e86d:	f2 0f 10 25 eb 47 01 	movsd  0x147eb(%rip),%xmm4        # 33060 <lua_ident@@LUA_5.4+0xc00>
   1e874:	00 
   1e875:	66 0f 28 c8          	movapd %xmm0,%xmm1
   1e879:	66 0f 28 d0          	movapd %xmm0,%xmm2
   1e87d:	66 0f 54 cb          	andpd  %xmm3,%xmm1
   1e881:	66 0f 2e e1          	ucomisd %xmm1,%xmm4
   1e885:	0f 87 e5 00 00 00    	ja     1e970 <lua_close@@LUA_5.4+0x7e60>
   1e88b:	66 0f 2f 15 bd 4d 01 	comisd 0x14dbd(%rip),%xmm2        # 33650 <lua_ident@@LUA_5.4+0x11f0>
   1e892:	00 
   1e893:	0f 82 9c 00 00 00    	jb     1e935 <lua_close@@LUA_5.4+0x7e25>
   1e899:	f2 0f 10 0d b7 4d 01 	movsd  0x14db7(%rip),%xmm1        # 33658 <lua_ident@@LUA_5.4+0x11f8>
   1e8a0:	00 
   1e8a1:	66 0f 2f ca          	comisd %xmm2,%xmm1
   1e8a5:	0f 86 8a 00 00 00    	jbe    1e935 <lua_close@@LUA_5.4+0x7e25>
   1e8ab:	f2 48 0f 2c d2       	cvttsd2si %xmm2,%rdx
   1e8b0:	48 39 d0             	cmp    %rdx,%rax
   1e8b3:	0f 9f c0             	setg   %al
   1e8b6:	0f b6 c0             	movzbl %al,%eax
   1e8b9:	e9 da d0 ff ff       	jmp    1b998 <lua_close@@LUA_5.4+0x4e88>
   1e8be:	f2 0f 10 1d 3a 51 01 	movsd  0x1513a(%rip),%xmm3        # 33a00 <lua_ident@@LUA_5.4+0x15a0>
   1e8c5:	00 
   1e8c6:	f2 0f 10 25 92 47 01 	movsd  0x14792(%rip),%xmm4        # 33060 <lua_ident@@LUA_5.4+0xc00>
   1e8cd:	00 
   1e8ce:	66 0f 28 c8          	movapd %xmm0,%xmm1
   1e8d2:	66 0f 28 d0          	movapd %xmm0,%xmm2
   1e8d6:	66 0f 54 cb          	andpd  %xmm3,%xmm1
   1e8da:	66 0f 2e e1          	ucomisd %xmm1,%xmm4
   1e8de:	76 33                	jbe    1e913 <lua_close@@LUA_5.4+0x7e03>
   1e8e0:	f2 48 0f 2c d0       	cvttsd2si %xmm0,%rdx
   1e8e5:	66 0f ef c9          	pxor   %xmm1,%xmm1
   1e8e9:	f2 0f 10 25 77 47 01 	movsd  0x14777(%rip),%xmm4        # 33068 <lua_ident@@LUA_5.4+0xc08>
   1e8f0:	00 
   1e8f1:	66 0f 55 d8          	andnpd %xmm0,%xmm3
   1e8f5:	f2 48 0f 2a ca       	cvtsi2sd %rdx,%xmm1
   1e8fa:	66 0f 28 d1          	movapd %xmm1,%xmm2
   1e8fe:	f2 0f c2 d0 06       	cmpnlesd %xmm0,%xmm2
   1e903:	66 0f 54 d4          	andpd  %xmm4,%xmm2
   1e907:	f2 0f 5c ca          	subsd  %xmm2,%xmm1
   1e90b:	66 0f 28 d3          	movapd %xmm3,%xmm2
   1e90f:	66 0f 56 d1          	orpd   %xmm1,%xmm2
   1e913:	66 0f 2e c2          	ucomisd %xmm2,%xmm0
   1e917:	66 0f 28 ca          	movapd %xmm2,%xmm1
   1e91b:	7a 02                	jp     1e91f <lua_close@@LUA_5.4+0x7e0f>
   1e91d:	74 0c                	je     1e92b <lua_close@@LUA_5.4+0x7e1b>
   1e91f:	f2 0f 58 15 41 47 01 	addsd  0x14741(%rip),%xmm2        # 33068 <lua_ident@@LUA_5.4+0xc08>
   1e926:	00 
   1e927:	66 0f 28 ca          	movapd %xmm2,%xmm1
   1e92b:	66 0f 2f 0d 1d 4d 01 	comisd 0x14d1d(%rip),%xmm1        # 33650 <lua_ident@@LUA_5.4+0x11f0>
   1e932:	00 
   1e933:	73 1a                	jae    1e94f <lua_close@@LUA_5.4+0x7e3f>
   1e935:	66 0f ef c9          	pxor   %xmm1,%xmm1
   1e939:	31 c0                	xor    %eax,%eax
   1e93b:	66 0f 2f c8          	comisd %xmm0,%xmm1
   1e93f:	0f 97 c0             	seta   %al
   1e942:	e9 51 d0 ff ff       	jmp    1b998 <lua_close@@LUA_5.4+0x4e88>
   1e947:	49 89 ed             	mov    %rbp,%r13
   1e94a:	e9 7c ca ff ff       	jmp    1b3cb <lua_close@@LUA_5.4+0x48bb>
   1e94f:	f2 0f 10 15 01 4d 01 	movsd  0x14d01(%rip),%xmm2        # 33658 <lua_ident@@LUA_5.4+0x11f8>
   1e956:	00 
   1e957:	66 0f 2f d1          	comisd %xmm1,%xmm2
   1e95b:	76 d8                	jbe    1e935 <lua_close@@LUA_5.4+0x7e25>
   1e95d:	f2 48 0f 2c d1       	cvttsd2si %xmm1,%rdx
   1e962:	48 39 d0             	cmp    %rdx,%rax
   1e965:	0f 9d c0             	setge  %al
   1e968:	0f b6 c0             	movzbl %al,%eax
   1e96b:	e9 28 d0 ff ff       	jmp    1b998 <lua_close@@LUA_5.4+0x4e88>
   1e970:	f2 48 0f 2c d0       	cvttsd2si %xmm0,%rdx
   1e975:	66 0f ef c9          	pxor   %xmm1,%xmm1
   1e979:	f2 0f 10 25 e7 46 01 	movsd  0x146e7(%rip),%xmm4        # 33068 <lua_ident@@LUA_5.4+0xc08>
   1e980:	00 
   1e981:	66 0f 55 d8          	andnpd %xmm0,%xmm3
   1e985:	f2 48 0f 2a ca       	cvtsi2sd %rdx,%xmm1
   1e98a:	66 0f 28 d1          	movapd %xmm1,%xmm2
   1e98e:	f2 0f c2 d0 06       	cmpnlesd %xmm0,%xmm2
   1e993:	66 0f 54 d4          	andpd  %xmm4,%xmm2
   1e997:	f2 0f 5c ca          	subsd  %xmm2,%xmm1
   1e99b:	66 0f 28 d3          	movapd %xmm3,%xmm2
   1e99f:	66 0f 56 d1          	orpd   %xmm1,%xmm2
   1e9a3:	66 0f 2f 15 a5 4c 01 	comisd 0x14ca5(%rip),%xmm2        # 33650 <lua_ident@@LUA_5.4+0x11f0>
   1e9aa:	00 
   1e9ab:	72 88                	jb     1e935 <lua_close@@LUA_5.4+0x7e25>
   1e9ad:	e9 e7 fe ff ff       	jmp    1e899 <lua_close@@LUA_5.4+0x7d89>
   1e9b2:	f2 0f 10 1d 46 50 01 	movsd  0x15046(%rip),%xmm3        # 33a00 <lua_ident@@LUA_5.4+0x15a0>
   1e9b9:	00 
   1e9ba:	f2 0f 10 25 9e 46 01 	movsd  0x1469e(%rip),%xmm4        # 33060 <lua_ident@@LUA_5.4+0xc00>
   1e9c1:	00 
   1e9c2:	66 0f 28 c8          	movapd %xmm0,%xmm1
   1e9c6:	66 0f 28 d0          	movapd %xmm0,%xmm2
   1e9ca:	66 0f 54 cb          	andpd  %xmm3,%xmm1
   1e9ce:	66 0f 2e e1          	ucomisd %xmm1,%xmm4
   1e9d2:	76 33                	jbe    1ea07 <lua_close@@LUA_5.4+0x7ef7>
   1e9d4:	f2 48 0f 2c c0       	cvttsd2si %xmm0,%rax
   1e9d9:	66 0f ef c9          	pxor   %xmm1,%xmm1
   1e9dd:	f2 0f 10 25 83 46 01 	movsd  0x14683(%rip),%xmm4        # 33068 <lua_ident@@LUA_5.4+0xc08>
   1e9e4:	00 
   1e9e5:	66 0f 55 d8          	andnpd %xmm0,%xmm3
   1e9e9:	f2 48 0f 2a c8       	cvtsi2sd %rax,%xmm1
   1e9ee:	66 0f 28 d1          	movapd %xmm1,%xmm2
   1e9f2:	f2 0f c2 d0 06       	cmpnlesd %xmm0,%xmm2
   1e9f7:	66 0f 54 d4          	andpd  %xmm4,%xmm2
   1e9fb:	f2 0f 5c ca          	subsd  %xmm2,%xmm1
   1e9ff:	66 0f 28 d3          	movapd %xmm3,%xmm2
   1ea03:	66 0f 56 d1          	orpd   %xmm1,%xmm2
   1ea07:	66 0f 2f 15 41 4c 01 	comisd 0x14c41(%rip),%xmm2        # 33650 <lua_ident@@LUA_5.4+0x11f0>
   1ea0e:	00 
   1ea0f:	0f 82 bd 00 00 00    	jb     1ead2 <lua_close@@LUA_5.4+0x7fc2>
   1ea15:	f2 0f 10 0d 3b 4c 01 	movsd  0x14c3b(%rip),%xmm1        # 33658 <lua_ident@@LUA_5.4+0x11f8>
   1ea1c:	00 
   1ea1d:	66 0f 2f ca          	comisd %xmm2,%xmm1
   1ea21:	0f 86 ab 00 00 00    	jbe    1ead2 <lua_close@@LUA_5.4+0x7fc2>
   1ea27:	f2 48 0f 2c c2       	cvttsd2si %xmm2,%rax
   1ea2c:	48 39 c1             	cmp    %rax,%rcx
   1ea2f:	0f 9e c0             	setle  %al
   1ea32:	0f b6 c0             	movzbl %al,%eax
   1ea35:	e9 5e cf ff ff       	jmp    1b998 <lua_close@@LUA_5.4+0x4e88>
   1ea3a:	f2 0f 10 1d be 4f 01 	movsd  0x14fbe(%rip),%xmm3        # 33a00 <lua_ident@@LUA_5.4+0x15a0>
   1ea41:	00 
   1ea42:	f2 0f 10 25 16 46 01 	movsd  0x14616(%rip),%xmm4        # 33060 <lua_ident@@LUA_5.4+0xc00>
   1ea49:	00 
   1ea4a:	66 0f 28 c8          	movapd %xmm0,%xmm1
   1ea4e:	66 0f 28 d0          	movapd %xmm0,%xmm2
   1ea52:	66 0f 54 cb          	andpd  %xmm3,%xmm1
   1ea56:	66 0f 2e e1          	ucomisd %xmm1,%xmm4
   1ea5a:	76 33                	jbe    1ea8f <lua_close@@LUA_5.4+0x7f7f>
   1ea5c:	f2 48 0f 2c c0       	cvttsd2si %xmm0,%rax
   1ea61:	66 0f ef c9          	pxor   %xmm1,%xmm1
   1ea65:	f2 0f 10 25 fb 45 01 	movsd  0x145fb(%rip),%xmm4        # 33068 <lua_ident@@LUA_5.4+0xc08>
   1ea6c:	00 
   1ea6d:	66 0f 55 d8          	andnpd %xmm0,%xmm3
   1ea71:	f2 48 0f 2a c8       	cvtsi2sd %rax,%xmm1
   1ea76:	66 0f 28 d1          	movapd %xmm1,%xmm2
   1ea7a:	f2 0f c2 d0 06       	cmpnlesd %xmm0,%xmm2
   1ea7f:	66 0f 54 d4          	andpd  %xmm4,%xmm2
   1ea83:	f2 0f 5c ca          	subsd  %xmm2,%xmm1
   1ea87:	66 0f 28 d3          	movapd %xmm3,%xmm2
   1ea8b:	66 0f 56 d1          	orpd   %xmm1,%xmm2
   1ea8f:	66 0f 2e c2          	ucomisd %xmm2,%xmm0
   1ea93:	66 0f 28 ca          	movapd %xmm2,%xmm1
   1ea97:	7a 02                	jp     1ea9b <lua_close@@LUA_5.4+0x7f8b>
   1ea99:	74 0c                	je     1eaa7 <lua_close@@LUA_5.4+0x7f97>
   1ea9b:	f2 0f 58 15 c5 45 01 	addsd  0x145c5(%rip),%xmm2        # 33068 <lua_ident@@LUA_5.4+0xc08>
   1eaa2:	00 
   1eaa3:	66 0f 28 ca          	movapd %xmm2,%xmm1
   1eaa7:	66 0f 2f 0d a1 4b 01 	comisd 0x14ba1(%rip),%xmm1        # 33650 <lua_ident@@LUA_5.4+0x11f0>
   1eaae:	00 
   1eaaf:	72 21                	jb     1ead2 <lua_close@@LUA_5.4+0x7fc2>
   1eab1:	f2 0f 10 15 9f 4b 01 	movsd  0x14b9f(%rip),%xmm2        # 33658 <lua_ident@@LUA_5.4+0x11f8>
   1eab8:	00 
   1eab9:	66 0f 2f d1          	comisd %xmm1,%xmm2
   1eabd:	76 13                	jbe    1ead2 <lua_close@@LUA_5.4+0x7fc2>
   1eabf:	f2 48 0f 2c c1       	cvttsd2si %xmm1,%rax
   1eac4:	48 39 c1             	cmp    %rax,%rcx
   1eac7:	0f 9c c0             	setl   %al
   1eaca:	0f b6 c0             	movzbl %al,%eax
   1eacd:	e9 c6 ce ff ff       	jmp    1b998 <lua_close@@LUA_5.4+0x4e88>
   1ead2:	66 0f ef c9          	pxor   %xmm1,%xmm1
   1ead6:	31 c0                	xor    %eax,%eax
   1ead8:	66 0f 2f c1          	comisd %xmm1,%xmm0
   1eadc:	0f 97 c0             	seta   %al
   1eadf:	e9 b4 ce ff ff       	jmp    1b998 <lua_close@@LUA_5.4+0x4e88>
   1eae4:	4d 89 ec             	mov    %r13,%r12
   1eae7:	e9 9c d6 ff ff       	jmp    1c188 <lua_close@@LUA_5.4+0x5678>
   1eaec:	31 c0                	xor    %eax,%eax
   1eaee:	48 39 d1             	cmp    %rdx,%rcx
   1eaf1:	0f 9c c0             	setl   %al
   1eaf4:	e9 9f ce ff ff       	jmp    1b998 <lua_close@@LUA_5.4+0x4e88>
   1eaf9:	31 c0                	xor    %eax,%eax
   1eafb:	48 39 d1             	cmp    %rdx,%rcx
   1eafe:	0f 9e c0             	setle  %al
   1eb01:	e9 92 ce ff ff       	jmp    1b998 <lua_close@@LUA_5.4+0x4e88>
   1eb06:	f2 0f 10 06          	movsd  (%rsi),%xmm0
   1eb0a:	f2 0f 10 1d ee 4e 01 	movsd  0x14eee(%rip),%xmm3        # 33a00 <lua_ident@@LUA_5.4+0x15a0>
   1eb11:	00 
   1eb12:	f2 0f 10 25 46 45 01 	movsd  0x14546(%rip),%xmm4        # 33060 <lua_ident@@LUA_5.4+0xc00>
   1eb19:	00 
   1eb1a:	66 0f 28 c8          	movapd %xmm0,%xmm1
   1eb1e:	66 0f 28 d0          	movapd %xmm0,%xmm2
   1eb22:	66 0f 54 cb          	andpd  %xmm3,%xmm1
   1eb26:	66 0f 2e e1          	ucomisd %xmm1,%xmm4
   1eb2a:	77 3a                	ja     1eb66 <lua_close@@LUA_5.4+0x8056>
   1eb2c:	66 0f 2e c2          	ucomisd %xmm2,%xmm0
   1eb30:	0f 8a c9 f3 ff ff    	jp     1deff <lua_close@@LUA_5.4+0x73ef>
   1eb36:	0f 85 c3 f3 ff ff    	jne    1deff <lua_close@@LUA_5.4+0x73ef>
   1eb3c:	66 0f 2f 15 0c 4b 01 	comisd 0x14b0c(%rip),%xmm2        # 33650 <lua_ident@@LUA_5.4+0x11f0>
   1eb43:	00 
   1eb44:	0f 82 b5 f3 ff ff    	jb     1deff <lua_close@@LUA_5.4+0x73ef>
   1eb4a:	f2 0f 10 05 06 4b 01 	movsd  0x14b06(%rip),%xmm0        # 33658 <lua_ident@@LUA_5.4+0x11f8>
   1eb51:	00 
   1eb52:	66 0f 2f c2          	comisd %xmm2,%xmm0
   1eb56:	0f 86 a3 f3 ff ff    	jbe    1deff <lua_close@@LUA_5.4+0x73ef>
   1eb5c:	f2 48 0f 2c c2       	cvttsd2si %xmm2,%rax
   1eb61:	e9 88 d5 ff ff       	jmp    1c0ee <lua_close@@LUA_5.4+0x55de>
   1eb66:	f2 48 0f 2c c0       	cvttsd2si %xmm0,%rax
   1eb6b:	66 0f ef c9          	pxor   %xmm1,%xmm1
   1eb6f:	f2 0f 10 25 f1 44 01 	movsd  0x144f1(%rip),%xmm4        # 33068 <lua_ident@@LUA_5.4+0xc08>
   1eb76:	00 
   1eb77:	66 0f 55 d8          	andnpd %xmm0,%xmm3
   1eb7b:	f2 48 0f 2a c8       	cvtsi2sd %rax,%xmm1
   1eb80:	66 0f 28 d1          	movapd %xmm1,%xmm2
   1eb84:	f2 0f c2 d0 06       	cmpnlesd %xmm0,%xmm2
   1eb89:	66 0f 54 d4          	andpd  %xmm4,%xmm2
   1eb8d:	f2 0f 5c ca          	subsd  %xmm2,%xmm1
   1eb91:	66 0f 28 d3          	movapd %xmm3,%xmm2
   1eb95:	66 0f 56 d1          	orpd   %xmm1,%xmm2
   1eb99:	eb 91                	jmp    1eb2c <lua_close@@LUA_5.4+0x801c>
   1eb9b:	f2 48 0f 2c d0       	cvttsd2si %xmm0,%rdx
   1eba0:	66 0f ef c9          	pxor   %xmm1,%xmm1
   1eba4:	f2 0f 10 25 bc 44 01 	movsd  0x144bc(%rip),%xmm4        # 33068 <lua_ident@@LUA_5.4+0xc08>
   1ebab:	00 
   1ebac:	66 0f 55 d8          	andnpd %xmm0,%xmm3
   1ebb0:	f2 48 0f 2a ca       	cvtsi2sd %rdx,%xmm1
   1ebb5:	66 0f 28 d1          	movapd %xmm1,%xmm2
   1ebb9:	f2 0f c2 d0 06       	cmpnlesd %xmm0,%xmm2
   1ebbe:	66 0f 54 d4          	andpd  %xmm4,%xmm2
   1ebc2:	f2 0f 5c ca          	subsd  %xmm2,%xmm1
   1ebc6:	66 0f 28 d3          	movapd %xmm3,%xmm2
   1ebca:	66 0f 56 d1          	orpd   %xmm1,%xmm2
   1ebce:	e9 03 f9 ff ff       	jmp    1e4d6 <lua_close@@LUA_5.4+0x79c6>
   1ebd3:	f2 48 0f 2c d0       	cvttsd2si %xmm0,%rdx
   1ebd8:	66 0f ef c9          	pxor   %xmm1,%xmm1
   1ebdc:	f2 0f 10 25 84 44 01 	movsd  0x14484(%rip),%xmm4        # 33068 <lua_ident@@LUA_5.4+0xc08>
   1ebe3:	00 
   1ebe4:	66 0f 55 d8          	andnpd %xmm0,%xmm3
   1ebe8:	f2 48 0f 2a ca       	cvtsi2sd %rdx,%xmm1
   1ebed:	66 0f 28 d1          	movapd %xmm1,%xmm2
   1ebf1:	f2 0f c2 d0 06       	cmpnlesd %xmm0,%xmm2
   1ebf6:	66 0f 54 d4          	andpd  %xmm4,%xmm2
   1ebfa:	f2 0f 5c ca          	subsd  %xmm2,%xmm1
   1ebfe:	66 0f 28 d3          	movapd %xmm3,%xmm2
   1ec02:	66 0f 56 d1          	orpd   %xmm1,%xmm2
   1ec06:	e9 5b f8 ff ff       	jmp    1e466 <lua_close@@LUA_5.4+0x7956>
   1ec0b:	f2 48 0f 2c c0       	cvttsd2si %xmm0,%rax
   1ec10:	66 0f ef c9          	pxor   %xmm1,%xmm1
   1ec14:	f2 0f 10 25 4c 44 01 	movsd  0x1444c(%rip),%xmm4        # 33068 <lua_ident@@LUA_5.4+0xc08>
   1ec1b:	00 
   1ec1c:	66 0f 55 d8          	andnpd %xmm0,%xmm3
   1ec20:	f2 48 0f 2a c8       	cvtsi2sd %rax,%xmm1
   1ec25:	66 0f 28 d1          	movapd %xmm1,%xmm2
   1ec29:	f2 0f c2 d0 06       	cmpnlesd %xmm0,%xmm2
   1ec2e:	66 0f 54 d4          	andpd  %xmm4,%xmm2
   1ec32:	f2 0f 5c ca          	subsd  %xmm2,%xmm1
   1ec36:	66 0f 28 d3          	movapd %xmm3,%xmm2
   1ec3a:	66 0f 56 d1          	orpd   %xmm1,%xmm2
   1ec3e:	e9 b3 f7 ff ff       	jmp    1e3f6 <lua_close@@LUA_5.4+0x78e6>
   1ec43:	f2 48 0f 2c c0       	cvttsd2si %xmm0,%rax
   1ec48:	66 0f ef c9          	pxor   %xmm1,%xmm1
   1ec4c:	f2 0f 10 25 14 44 01 	movsd  0x14414(%rip),%xmm4        # 33068 <lua_ident@@LUA_5.4+0xc08>
   1ec53:	00 
   1ec54:	66 0f 55 d8          	andnpd %xmm0,%xmm3
   1ec58:	f2 48 0f 2a c8       	cvtsi2sd %rax,%xmm1
   1ec5d:	66 0f 28 d1          	movapd %xmm1,%xmm2
   1ec61:	f2 0f c2 d0 06       	cmpnlesd %xmm0,%xmm2
   1ec66:	66 0f 54 d4          	andpd  %xmm4,%xmm2
   1ec6a:	f2 0f 5c ca          	subsd  %xmm2,%xmm1
   1ec6e:	66 0f 28 d3          	movapd %xmm3,%xmm2
   1ec72:	66 0f 56 d1          	orpd   %xmm1,%xmm2
   1ec76:	e9 0b f7 ff ff       	jmp    1e386 <lua_close@@LUA_5.4+0x7876>
   1ec7b:	f2 48 0f 2c c0       	cvttsd2si %xmm0,%rax
   1ec80:	66 0f ef c9          	pxor   %xmm1,%xmm1
   1ec84:	f2 0f 10 25 dc 43 01 	movsd  0x143dc(%rip),%xmm4        # 33068 <lua_ident@@LUA_5.4+0xc08>
   1ec8b:	00 
   1ec8c:	66 0f 55 d8          	andnpd %xmm0,%xmm3
   1ec90:	f2 48 0f 2a c8       	cvtsi2sd %rax,%xmm1
   1ec95:	66 0f 28 d1          	movapd %xmm1,%xmm2
   1ec99:	f2 0f c2 d0 06       	cmpnlesd %xmm0,%xmm2
   1ec9e:	66 0f 54 d4          	andpd  %xmm4,%xmm2
   1eca2:	f2 0f 5c ca          	subsd  %xmm2,%xmm1
   1eca6:	66 0f 28 d3          	movapd %xmm3,%xmm2
   1ecaa:	66 0f 56 d1          	orpd   %xmm1,%xmm2
   1ecae:	e9 5c f6 ff ff       	jmp    1e30f <lua_close@@LUA_5.4+0x77ff>
   1ecb3:	f2 48 0f 2c c0       	cvttsd2si %xmm0,%rax
   1ecb8:	66 0f ef c9          	pxor   %xmm1,%xmm1
   1ecbc:	f2 0f 10 25 a4 43 01 	movsd  0x143a4(%rip),%xmm4        # 33068 <lua_ident@@LUA_5.4+0xc08>
   1ecc3:	00 
   1ecc4:	66 0f 55 d8          	andnpd %xmm0,%xmm3
   1ecc8:	f2 48 0f 2a c8       	cvtsi2sd %rax,%xmm1
   1eccd:	66 0f 28 d1          	movapd %xmm1,%xmm2
   1ecd1:	f2 0f c2 d0 06       	cmpnlesd %xmm0,%xmm2
   1ecd6:	66 0f 54 d4          	andpd  %xmm4,%xmm2
   1ecda:	f2 0f 5c ca          	subsd  %xmm2,%xmm1
   1ecde:	66 0f 28 d3          	movapd %xmm3,%xmm2
   1ece2:	66 0f 56 d1          	orpd   %xmm1,%xmm2
   1ece6:	e9 5b f5 ff ff       	jmp    1e246 <lua_close@@LUA_5.4+0x7736>
   1eceb:	f2 48 0f 2c c0       	cvttsd2si %xmm0,%rax
   1ecf0:	66 0f ef c9          	pxor   %xmm1,%xmm1
   1ecf4:	f2 0f 10 25 6c 43 01 	movsd  0x1436c(%rip),%xmm4        # 33068 <lua_ident@@LUA_5.4+0xc08>
   1ecfb:	00 
   1ecfc:	66 0f 55 d8          	andnpd %xmm0,%xmm3
   1ed00:	f2 48 0f 2a c8       	cvtsi2sd %rax,%xmm1
   1ed05:	66 0f 28 d1          	movapd %xmm1,%xmm2
   1ed09:	f2 0f c2 d0 06       	cmpnlesd %xmm0,%xmm2
   1ed0e:	66 0f 54 d4          	andpd  %xmm4,%xmm2
   1ed12:	f2 0f 5c ca          	subsd  %xmm2,%xmm1
   1ed16:	66 0f 28 d3          	movapd %xmm3,%xmm2
   1ed1a:	66 0f 56 d1          	orpd   %xmm1,%xmm2
   1ed1e:	e9 b3 f4 ff ff       	jmp    1e1d6 <lua_close@@LUA_5.4+0x76c6>
   1ed23:	f2 48 0f 2c c0       	cvttsd2si %xmm0,%rax
   1ed28:	66 0f ef c9          	pxor   %xmm1,%xmm1
   1ed2c:	f2 0f 10 25 34 43 01 	movsd  0x14334(%rip),%xmm4        # 33068 <lua_ident@@LUA_5.4+0xc08>
   1ed33:	00 
   1ed34:	66 0f 55 d8          	andnpd %xmm0,%xmm3
   1ed38:	f2 48 0f 2a c8       	cvtsi2sd %rax,%xmm1
   1ed3d:	66 0f 28 d1          	movapd %xmm1,%xmm2
   1ed41:	f2 0f c2 d0 06       	cmpnlesd %xmm0,%xmm2
   1ed46:	66 0f 54 d4          	andpd  %xmm4,%xmm2
   1ed4a:	f2 0f 5c ca          	subsd  %xmm2,%xmm1
   1ed4e:	66 0f 28 d3          	movapd %xmm3,%xmm2
   1ed52:	66 0f 56 d1          	orpd   %xmm1,%xmm2
   1ed56:	e9 0b f4 ff ff       	jmp    1e166 <lua_close@@LUA_5.4+0x7656>
   1ed5b:	f2 48 0f 2c c0       	cvttsd2si %xmm0,%rax
   1ed60:	66 0f ef c9          	pxor   %xmm1,%xmm1
   1ed64:	f2 0f 10 25 fc 42 01 	movsd  0x142fc(%rip),%xmm4        # 33068 <lua_ident@@LUA_5.4+0xc08>
   1ed6b:	00 
   1ed6c:	66 0f 55 d8          	andnpd %xmm0,%xmm3
   1ed70:	f2 48 0f 2a c8       	cvtsi2sd %rax,%xmm1
   1ed75:	66 0f 28 d1          	movapd %xmm1,%xmm2
   1ed79:	f2 0f c2 d0 06       	cmpnlesd %xmm0,%xmm2
   1ed7e:	66 0f 54 d4          	andpd  %xmm4,%xmm2
   1ed82:	f2 0f 5c ca          	subsd  %xmm2,%xmm1
   1ed86:	66 0f 28 d3          	movapd %xmm3,%xmm2
   1ed8a:	66 0f 56 d1          	orpd   %xmm1,%xmm2
   1ed8e:	e9 63 f3 ff ff       	jmp    1e0f6 <lua_close@@LUA_5.4+0x75e6>
   1ed93:	f2 48 0f 2c c0       	cvttsd2si %xmm0,%rax
   1ed98:	66 0f ef c9          	pxor   %xmm1,%xmm1
   1ed9c:	f2 0f 10 25 c4 42 01 	movsd  0x142c4(%rip),%xmm4        # 33068 <lua_ident@@LUA_5.4+0xc08>
   1eda3:	00 
   1eda4:	66 0f 55 d8          	andnpd %xmm0,%xmm3
   1eda8:	f2 48 0f 2a c8       	cvtsi2sd %rax,%xmm1
   1edad:	66 0f 28 d1          	movapd %xmm1,%xmm2
   1edb1:	f2 0f c2 d0 06       	cmpnlesd %xmm0,%xmm2
   1edb6:	66 0f 54 d4          	andpd  %xmm4,%xmm2
   1edba:	f2 0f 5c ca          	subsd  %xmm2,%xmm1
   1edbe:	66 0f 28 d3          	movapd %xmm3,%xmm2
   1edc2:	66 0f 56 d1          	orpd   %xmm1,%xmm2
   1edc6:	e9 bb f2 ff ff       	jmp    1e086 <lua_close@@LUA_5.4+0x7576>
   1edcb:	f2 48 0f 2c c0       	cvttsd2si %xmm0,%rax
   1edd0:	66 0f ef c9          	pxor   %xmm1,%xmm1
   1edd4:	f2 0f 10 25 8c 42 01 	movsd  0x1428c(%rip),%xmm4        # 33068 <lua_ident@@LUA_5.4+0xc08>
   1eddb:	00 
   1eddc:	66 0f 55 d8          	andnpd %xmm0,%xmm3
   1ede0:	f2 48 0f 2a c8       	cvtsi2sd %rax,%xmm1
   1ede5:	66 0f 28 d1          	movapd %xmm1,%xmm2
   1ede9:	f2 0f c2 d0 06       	cmpnlesd %xmm0,%xmm2
   1edee:	66 0f 54 d4          	andpd  %xmm4,%xmm2
   1edf2:	f2 0f 5c ca          	subsd  %xmm2,%xmm1
   1edf6:	66 0f 28 d3          	movapd %xmm3,%xmm2
   1edfa:	66 0f 56 d1          	orpd   %xmm1,%xmm2
   1edfe:	e9 13 f2 ff ff       	jmp    1e016 <lua_close@@LUA_5.4+0x7506>
   1ee03:	f2 48 0f 2c c0       	cvttsd2si %xmm0,%rax
   1ee08:	66 0f ef c9          	pxor   %xmm1,%xmm1
   1ee0c:	f2 0f 10 25 54 42 01 	movsd  0x14254(%rip),%xmm4        # 33068 <lua_ident@@LUA_5.4+0xc08>
   1ee13:	00 
   1ee14:	66 0f 55 d8          	andnpd %xmm0,%xmm3
   1ee18:	f2 48 0f 2a c8       	cvtsi2sd %rax,%xmm1
   1ee1d:	66 0f 28 d1          	movapd %xmm1,%xmm2
   1ee21:	f2 0f c2 d0 06       	cmpnlesd %xmm0,%xmm2
   1ee26:	66 0f 54 d4          	andpd  %xmm4,%xmm2
   1ee2a:	f2 0f 5c ca          	subsd  %xmm2,%xmm1
   1ee2e:	66 0f 28 d3          	movapd %xmm3,%xmm2
   1ee32:	66 0f 56 d1          	orpd   %xmm1,%xmm2
   1ee36:	e9 66 f1 ff ff       	jmp    1dfa1 <lua_close@@LUA_5.4+0x7491>
   1ee3b:	f2 48 0f 2c d0       	cvttsd2si %xmm0,%rdx
   1ee40:	66 0f ef c9          	pxor   %xmm1,%xmm1
   1ee44:	f2 0f 10 25 1c 42 01 	movsd  0x1421c(%rip),%xmm4        # 33068 <lua_ident@@LUA_5.4+0xc08>
   1ee4b:	00 
   1ee4c:	66 0f 55 d8          	andnpd %xmm0,%xmm3
   1ee50:	f2 48 0f 2a ca       	cvtsi2sd %rdx,%xmm1
   1ee55:	66 0f 28 d1          	movapd %xmm1,%xmm2
   1ee59:	f2 0f c2 d0 06       	cmpnlesd %xmm0,%xmm2
   1ee5e:	66 0f 54 d4          	andpd  %xmm4,%xmm2
   1ee62:	f2 0f 5c ca          	subsd  %xmm2,%xmm1
   1ee66:	66 0f 28 d3          	movapd %xmm3,%xmm2
   1ee6a:	66 0f 56 d1          	orpd   %xmm1,%xmm2
   1ee6e:	e9 43 f7 ff ff       	jmp    1e5b6 <lua_close@@LUA_5.4+0x7aa6>
   1ee73:	f2 48 0f 2c d0       	cvttsd2si %xmm0,%rdx
   1ee78:	66 0f ef c9          	pxor   %xmm1,%xmm1
   1ee7c:	f2 0f 10 25 e4 41 01 	movsd  0x141e4(%rip),%xmm4        # 33068 <lua_ident@@LUA_5.4+0xc08>
   1ee83:	00 
   1ee84:	66 0f 55 d8          	andnpd %xmm0,%xmm3
   1ee88:	f2 48 0f 2a ca       	cvtsi2sd %rdx,%xmm1
   1ee8d:	66 0f 28 d1          	movapd %xmm1,%xmm2
   1ee91:	f2 0f c2 d0 06       	cmpnlesd %xmm0,%xmm2
   1ee96:	66 0f 54 d4          	andpd  %xmm4,%xmm2
   1ee9a:	f2 0f 5c ca          	subsd  %xmm2,%xmm1
   1ee9e:	66 0f 28 d3          	movapd %xmm3,%xmm2
   1eea2:	66 0f 56 d1          	orpd   %xmm1,%xmm2
   1eea6:	e9 9b f6 ff ff       	jmp    1e546 <lua_close@@LUA_5.4+0x7a36>
   1eeab:	f2 48 0f 2c d0       	cvttsd2si %xmm0,%rdx
   1eeb0:	66 0f ef c9          	pxor   %xmm1,%xmm1
   1eeb4:	f2 0f 10 25 ac 41 01 	movsd  0x141ac(%rip),%xmm4        # 33068 <lua_ident@@LUA_5.4+0xc08>
   1eebb:	00 
   1eebc:	66 0f 55 d8          	andnpd %xmm0,%xmm3
   1eec0:	f2 48 0f 2a ca       	cvtsi2sd %rdx,%xmm1
   1eec5:	66 0f 28 d1          	movapd %xmm1,%xmm2
   1eec9:	f2 0f c2 d0 06       	cmpnlesd %xmm0,%xmm2
   1eece:	66 0f 54 d4          	andpd  %xmm4,%xmm2
   1eed2:	f2 0f 5c ca          	subsd  %xmm2,%xmm1
   1eed6:	66 0f 28 d3          	movapd %xmm3,%xmm2
   1eeda:	66 0f 56 d1          	orpd   %xmm1,%xmm2
   1eede:	e9 43 f7 ff ff       	jmp    1e626 <lua_close@@LUA_5.4+0x7b16>
   1eee3:	48 8d 35 25 4a 01 00 	lea    0x14a25(%rip),%rsi        # 3390f <lua_ident@@LUA_5.4+0x14af>
   1eeea:	4c 89 ff             	mov    %r15,%rdi
   1eeed:	31 c0                	xor    %eax,%eax
   1eeef:	e8 6c db fe ff       	call   ca60 <lua_getinfo@@LUA_5.4+0x5a0>
   1eef4:	48 8d 35 2e 4a 01 00 	lea    0x14a2e(%rip),%rsi        # 33929 <lua_ident@@LUA_5.4+0x14c9>
   1eefb:	4c 89 ff             	mov    %r15,%rdi
   1eefe:	31 c0                	xor    %eax,%eax
   1ef00:	e8 5b db fe ff       	call   ca60 <lua_getinfo@@LUA_5.4+0x5a0>
   1ef05:	e8 a6 84 fe ff       	call   73b0 <__stack_chk_fail@plt>
